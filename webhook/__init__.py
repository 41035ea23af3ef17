"""The validating admission webhook: the reconcilers' rules, enforced at admission."""

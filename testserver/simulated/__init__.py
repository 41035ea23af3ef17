"""The simulated cluster's components, one class each (testserver/simulator.py runs them)."""

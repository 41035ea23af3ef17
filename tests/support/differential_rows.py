"""Shared by the tests of differential_rows in more than one tier."""

from __future__ import annotations

from typing import Any

from objtypes import Obj
from tests.support.differential import (
    APPLY,
    MERGE,
    Compact,
    Ctx,
    Difference,
    Request,
    Row,
    Watch,
    configmap,
    configmaps,
    isvc,
    isvcs,
    models,
    quotas,
)

GET, POST, PUT, PATCH, DELETE = "GET", "POST", "PUT", "PATCH", "DELETE"
SPEC = ("spec.replicas", "spec.runtime", "metadata.generation")


MODEL: Obj = {
    "apiVersion": "inference.llmkube.dev/v1alpha1",
    "kind": "Model",
    "metadata": {"name": "m"},
    "spec": {"source": "Qwen/Qwen3-8B"},
}
JSON_PATCH = "application/json-patch+json"
CREATED: Obj = {"code": 201}
OK: Obj = {"code": 200}
GONE = ("ERROR", 410, "Expired", "too old resource version: N (N)")


def labelled(name: str, **labels: str) -> Obj:
    obj = isvc(name)
    obj["metadata"]["labels"] = labels
    return obj


def with_rv(label: str, obj: Obj) -> Any:
    """obj with the resourceVersion step `label` answered (an update's precondition)."""

    def body(ctx: Ctx) -> Obj:
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": ctx.rv(label)}}

    return body


def from_rv(label: str, extra: str = "") -> Any:
    """A watch query from the resourceVersion step `label` answered."""
    return lambda ctx: f"watch=true&resourceVersion={ctx.rv(label)}{extra}"


def apply(path: str, obj: Obj, manager: str, *, force: bool = False, **kw: Any) -> Request:
    query = f"fieldManager={manager}" + ("&force=true" if force else "")
    return Request(PATCH, path, obj, query, APPLY, **kw)


def create_isvcs(*names: str) -> tuple[Request, ...]:
    return tuple(Request(POST, isvcs(), isvc(n), label=n) for n in names)


ROWS: list[Row] = [
    # -- CRUD ------------------------------------------------------------------------------
    Row(
        "create-get-delete",
        (
            Request(POST, isvcs(), isvc("a"), pick=SPEC),
            Request(GET, isvcs("a"), pick=SPEC),
            Request(DELETE, isvcs("a"), pick=("metadata.name",)),
            Request(GET, isvcs("a")),
        ),
    ),
    Row(
        "create-twice-already-exists",
        (Request(POST, isvcs(), isvc("a")), Request(POST, isvcs(), isvc("a", replicas=2))),
    ),
    Row(
        "missing-object-get-put-delete",
        (
            Request(GET, isvcs("nope")),
            Request(PUT, isvcs("nope"), isvc("nope")),
            Request(DELETE, isvcs("nope")),
            Request(PATCH, isvcs("nope"), {"spec": {"replicas": 2}}, content_type=MERGE),
        ),
    ),
    Row(
        "update-bumps-generation",
        (
            Request(POST, isvcs(), isvc("a"), label="a"),
            Request(PUT, isvcs("a"), with_rv("a", isvc("a", replicas=3)), pick=SPEC),
            Request(PATCH, isvcs("a"), {"spec": {"replicas": 4}}, content_type=MERGE, pick=SPEC),
        ),
    ),
    Row(
        "stale-resource-version-conflict",
        (
            Request(POST, isvcs(), isvc("a"), label="a"),
            Request(PUT, isvcs("a"), with_rv("a", isvc("a", replicas=2))),
            Request(PUT, isvcs("a"), with_rv("a", isvc("a", replicas=3))),
            Request(
                PATCH,
                isvcs("a"),
                lambda ctx: {"metadata": {"resourceVersion": ctx.rv("a")}, "spec": {"replicas": 5}},
                content_type=MERGE,
            ),
            Request(GET, isvcs("a"), pick=SPEC),
        ),
    ),
    Row(
        "update-without-resource-version",
        (
            Request(POST, isvcs(), isvc("a")),
            Request(PUT, isvcs("a"), isvc("a", replicas=2), pick=SPEC),
        ),
    ),
    Row(
        "name-and-kind-mismatch",
        (
            Request(POST, isvcs(), isvc("a"), label="a"),
            Request(PUT, isvcs("a"), with_rv("a", isvc("b"))),
            Request(POST, isvcs(), {**isvc("c"), "kind": "Model"}),
        ),
    ),
    Row(
        "delete-precondition-stale-resource-version",
        (
            Request(POST, isvcs(), isvc("a"), label="a"),
            Request(PATCH, isvcs("a"), {"spec": {"replicas": 2}}, content_type=MERGE),
            Request(
                DELETE,
                isvcs("a"),
                lambda ctx: {
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "preconditions": {"resourceVersion": ctx.rv("a")},
                },
            ),
            Request(GET, isvcs("a"), pick=("metadata.name",)),
        ),
    ),
    Row(
        "dry-run-stores-nothing",
        (
            Request(POST, isvcs(), isvc("a"), "dryRun=All", pick=SPEC),
            Request(GET, isvcs("a")),
            Request(POST, isvcs(), isvc("b"), label="b"),
            Request(DELETE, isvcs("b"), query="dryRun=All"),
            Request(GET, isvcs("b"), pick=("metadata.name",)),
        ),
    ),
    Row(
        "json-patch-test-and-replace",
        (
            Request(POST, isvcs(), isvc("a")),
            Request(
                PATCH,
                isvcs("a"),
                [
                    {"op": "test", "path": "/spec/replicas", "value": 1},
                    {"op": "replace", "path": "/spec/replicas", "value": 3},
                ],
                content_type=JSON_PATCH,
                pick=SPEC,
            ),
            Request(
                PATCH,
                isvcs("a"),
                [{"op": "test", "path": "/spec/replicas", "value": 1}],
                content_type=JSON_PATCH,
            ),
        ),
    ),
    Row(
        "label-selector-list-and-watch",
        (
            Request(POST, isvcs(), labelled("a", tier="gold")),
            Request(POST, isvcs(), labelled("b", tier="free")),
            Request(GET, isvcs(), query="labelSelector=tier%3Dgold", pick=("@names",), label="l"),
            Watch(
                isvcs(),
                lambda ctx: f"watch=true&labelSelector=tier%3Dgold&resourceVersion={ctx.rv('l')}",
                during=(
                    Request(
                        PATCH,
                        isvcs("b"),
                        {"metadata": {"labels": {"tier": "gold"}}},
                        content_type=MERGE,
                    ),
                    Request(
                        PATCH,
                        isvcs("a"),
                        {"metadata": {"labels": {"tier": "free"}}},
                        content_type=MERGE,
                    ),
                ),
                events=2,
            ),
        ),
    ),
    # -- server-side apply ------------------------------------------------------------------
    Row(
        "apply-conflict-between-managers-then-force",
        (
            apply(isvcs("a"), isvc("a", replicas=2), "alice", pick=("@managers",)),
            apply(isvcs("a"), isvc("a", replicas=3), "bob"),
            apply(isvcs("a"), isvc("a", replicas=3), "bob", force=True, pick=("@managers", *SPEC)),
            apply(isvcs("a"), isvc("a", replicas=2), "alice"),
        ),
    ),
    Row(
        "apply-same-value-is-shared",
        (
            apply(isvcs("a"), isvc("a", replicas=2), "alice"),
            apply(isvcs("a"), isvc("a", replicas=2), "bob", pick=("@managers",), label="b"),
            apply(isvcs("a"), isvc("a", replicas=2), "bob", pick=("@same-rv:b",)),
        ),
    ),
    Row(
        "apply-conflict-with-an-update-manager",
        (
            Request(POST, isvcs(), isvc("a"), "fieldManager=kubectl-create"),
            Request(
                PATCH, isvcs("a"), {"spec": {"replicas": 4}}, "fieldManager=kubectl-edit", MERGE
            ),
            apply(isvcs("a"), isvc("a", replicas=1), "ci", pick=("@managers",)),
        ),
    ),
    Row(
        "apply-status-subresource-managers",
        (
            apply(isvcs("a"), isvc("a"), "user"),
            apply(
                isvcs("a", "status"),
                {**isvc("a"), "status": {"replicas": 1, "phase": "Ready"}},
                "controller",
                pick=("@managers", "status.replicas"),
            ),
            apply(isvcs("a"), {**isvc("a"), "status": {"replicas": 7}}, "user", pick=("status",)),
        ),
    ),
    # -- watch -------------------------------------------------------------------------------
    Row(
        "watch-replays-from-a-resource-version",
        (
            *create_isvcs("a", "b"),
            Request(PATCH, isvcs("a"), {"spec": {"replicas": 2}}, content_type=MERGE),
            Request(DELETE, isvcs("b")),
            Watch(isvcs(), from_rv("a"), events=3),
        ),
    ),
    Row(
        "watch-from-the-current-resource-version",
        (
            *create_isvcs("a"),
            Request(GET, isvcs(), label="list"),
            Watch(isvcs(), from_rv("list"), during=create_isvcs("b"), events=1),
        ),
    ),
    Row(
        "watch-without-resource-version-lists-first",
        (
            *create_isvcs("a", "b"),
            Watch(isvcs(), "watch=true", during=create_isvcs("c"), events=3),
            Watch(
                isvcs(), "watch=true&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1"
            ),
        ),
    ),
    Row(
        "watch-from-a-future-resource-version",
        (
            *create_isvcs("a"),
            Watch(
                isvcs(),
                lambda ctx: (
                    f"watch=true&timeoutSeconds=2&resourceVersion={int(ctx.rv('a')) + 100000}"
                ),
            ),
        ),
    ),
    Row(
        "watch-older-than-history-is-gone",
        (*create_isvcs("a"), Compact(), Watch(isvcs(), "watch=true&resourceVersion=1")),
    ),
    Row(
        "watch-from-a-compacted-resource-version-of-the-cache-window",
        (*create_isvcs("a", "b"), Compact(), Watch(isvcs(), from_rv("a", "&timeoutSeconds=2"))),
        Difference(
            "kube-apiserver serves watches from its watch cache, whose window is its own (etcd's "
            "compaction does not shorten it); this server's window is its history since the last "
            "compaction",
            testserver=[CREATED, CREATED, "compacted", {"code": 200, "events": [GONE]}],
            kube=[CREATED, CREATED, "compacted", {"code": 200, "events": [("ADDED", "b")]}],
        ),
    ),
    Row(
        "watch-bookmarks",
        (
            *create_isvcs("a", "b"),
            Watch(isvcs(), from_rv("a", "&allowWatchBookmarks=true&timeoutSeconds=3")),
        ),
    ),
    Row(
        "watch-send-initial-events",
        (
            *create_isvcs("a", "b"),
            Watch(
                isvcs(),
                "watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                "&resourceVersionMatch=NotOlderThan&timeoutSeconds=3",
            ),
        ),
    ),
    Row(
        "watch-send-initial-events-needs-bookmarks",
        (
            Watch(
                isvcs(),
                "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                "&timeoutSeconds=2",
            ),
            Watch(
                isvcs(),
                "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&timeoutSeconds=2",
            ),
        ),
    ),
    # -- paging ------------------------------------------------------------------------------
    Row(
        "paging-limit-continue-remaining",
        (
            *create_isvcs("a", "b", "c", "d", "e"),
            Request(
                GET,
                isvcs(),
                query="limit=2",
                pick=("@names", "@continue", "@remaining"),
                label="p1",
            ),
            Request(POST, isvcs(), isvc("aa")),
            Request(DELETE, isvcs("d")),
            Request(
                GET,
                isvcs(),
                query=lambda ctx: f"limit=2&continue={ctx.cont('p1')}",
                pick=("@names", "@continue", "@remaining"),
                label="p2",
            ),
            Request(
                GET,
                isvcs(),
                query=lambda ctx: f"limit=2&continue={ctx.cont('p2')}",
                pick=("@names", "@continue", "@remaining"),
            ),
            Request(GET, isvcs(), pick=("@names", "@continue", "@remaining")),
        ),
    ),
    Row(
        "paging-continue-after-compaction-is-gone",
        (
            *create_isvcs("a", "b", "c"),
            Request(GET, isvcs(), query="limit=1", label="p1"),
            Request(PATCH, isvcs("a"), {"spec": {"replicas": 2}}, content_type=MERGE),
            Compact(),
            Request(GET, isvcs(), query=lambda ctx: f"limit=1&continue={ctx.cont('p1')}"),
        ),
        Difference(
            "kube-apiserver 1.34 serves the next page from its watch cache's snapshot, which "
            "etcd's compaction does not expire; this server's continue tokens expire with "
            "compaction (410 `Expired`, kube-apiserver's answer when it reads the page from etcd)",
            testserver=[
                *[CREATED] * 3,
                OK,
                OK,
                "compacted",
                {
                    "code": 410,
                    "reason": "Expired",
                    "message": "The provided continue parameter is too old to display a "
                    "consistent list result. You can start a new list without the continue "
                    "parameter.",
                },
            ],
            kube=[*[CREATED] * 3, OK, OK, "compacted", OK],
        ),
    ),
    Row(
        "paging-invalid-continue-token",
        (Request(GET, isvcs(), query="limit=1&continue=bm90LWEtdG9rZW4"),),
        Difference(
            "the 400 for an undecodable continue token says `invalid continue token` without "
            "Go's JSON decoder's words after it",
            testserver=[{"code": 400, "reason": "BadRequest", "message": "invalid continue token"}],
            kube=[
                {
                    "code": 400,
                    "reason": "BadRequest",
                    "message": "invalid continue token: continue key is not valid: invalid "
                    "character 'o' in literal null (expecting 'u')",
                }
            ],
        ),
    ),
    # -- status and scale subresources ----------------------------------------------------------
    Row(
        "status-ignored-on-the-main-resource",
        (
            Request(POST, isvcs(), {**isvc("a"), "status": {"replicas": 3}}, pick=("status",)),
            Request(
                PATCH,
                isvcs("a"),
                {"spec": {"replicas": 2}, "status": {"replicas": 5}},
                content_type=MERGE,
                pick=("spec.replicas", "status", "metadata.generation"),
            ),
        ),
    ),
    Row(
        "spec-ignored-on-status",
        (
            Request(POST, isvcs(), isvc("a")),
            Request(
                PATCH,
                isvcs("a", "status"),
                {"spec": {"replicas": 4}, "status": {"replicas": 2, "phase": "Ready"}},
                "fieldManager=operator",
                MERGE,
                pick=(
                    "spec.replicas",
                    "status.replicas",
                    "status.phase",
                    "metadata.generation",
                    "@managers",
                ),
                label="s",
            ),
            Request(
                PUT,
                isvcs("a", "status"),
                lambda ctx: {
                    **ctx.bodies["s"],
                    "spec": {"modelRef": "other"},
                    "status": {"replicas": 1},
                },
                pick=("spec.modelRef", "status.replicas", "metadata.generation"),
            ),
        ),
    ),
    Row(
        "scale-reads-and-writes-spec-replicas",
        (
            Request(POST, isvcs(), isvc("a", replicas=2)),
            Request(
                PATCH,
                isvcs("a", "status"),
                {"status": {"replicas": 1, "selector": "app=a"}},
                content_type=MERGE,
            ),
            Request(GET, isvcs("a", "scale"), pick=("kind", "apiVersion", "spec", "status")),
            Request(
                PATCH,
                isvcs("a", "scale"),
                {"spec": {"replicas": 5}},
                content_type=MERGE,
                pick=("spec", "status"),
            ),
            Request(GET, isvcs("a"), pick=("spec.replicas", "metadata.generation")),
        ),
    ),
    Row(
        "scale-out-of-range",
        (
            Request(POST, isvcs(), isvc("a")),
            Request(PATCH, isvcs("a", "scale"), {"spec": {"replicas": 11}}, content_type=MERGE),
            Request(PATCH, isvcs("a", "scale"), {"spec": {"replicas": -1}}, content_type=MERGE),
            Request(POST, models(), MODEL),
            Request(GET, models("m") + "/scale"),
            Request(GET, isvcs("a", "bogus")),
        ),
    ),
    # -- schema, CEL, field validation -----------------------------------------------------------
    Row(
        "schema-errors",
        (
            Request(POST, isvcs(), isvc("a", replicas=11)),
            Request(POST, isvcs(), isvc("b", runtime="nope")),
            Request(POST, isvcs(), {**isvc("c"), "spec": {"replicas": 1}}),
            Request(POST, isvcs(), isvc("d", replicas="two")),
            Request(POST, isvcs(), isvc("e", modelRef="")),
        ),
    ),
    Row(
        "cel-rules",
        (
            Request(POST, isvcs(), isvc("a", replicas=2, multiNode={"members": []})),
            Request(
                POST,
                quotas(),
                {
                    "apiVersion": "inference.llmkube.dev/v1alpha1",
                    "kind": "GPUQuota",
                    "metadata": {"name": "q"},
                    "spec": {"gpuCount": 2},
                },
            ),
            Request(
                POST,
                models(),
                {
                    "apiVersion": "inference.llmkube.dev/v1alpha1",
                    "kind": "Model",
                    "metadata": {"name": "m"},
                    "spec": {
                        "source": "Qwen/Qwen3-8B",
                        "hardware": {
                            "gpu": {"enabled": True, "resourceClaims": [{"name": "gpus"}]}
                        },
                    },
                },
            ),
        ),
    ),
    Row(
        "field-validation-unknown-fields",
        (
            Request(POST, isvcs(), isvc("a", bogus=1), "fieldValidation=Strict"),
            Request(
                POST, isvcs(), isvc("b", bogus=1), "fieldValidation=Warn", pick=("spec.bogus",)
            ),
            Request(
                POST, isvcs(), isvc("c", bogus=1), "fieldValidation=Ignore", pick=("spec.bogus",)
            ),
            Request(POST, isvcs(), isvc("d", bogus=1), pick=("spec.bogus",)),
        ),
    ),
    Row(
        "apply-of-an-undeclared-field",
        (apply(isvcs("a"), isvc("a", bogus=1), "alice", pick=("spec.bogus",)),),
        Difference(
            "kube-apiserver refuses an apply of a field the schema does not declare with a 500 "
            "(the typed patch cannot be built), whatever fieldValidation says; this server "
            "prunes it (400 with Strict), as for create and update",
            testserver=[
                {
                    "code": 201,
                    "spec.bogus": None,
                    "warnings": ['299 - "unknown field \\"spec.bogus\\""'],
                }
            ],
            kube=[
                {
                    "code": 500,
                    "reason": None,
                    "message": "failed to create typed patch object (/a; "
                    "inference.llmkube.dev/v1alpha1, Kind=InferenceService): .spec.bogus: "
                    "field not declared in schema",
                }
            ],
        ),
    ),
    # -- admission -------------------------------------------------------------------------------
    Row(
        "write-into-a-missing-namespace",
        (
            Request(POST, configmaps(namespace="{ns}-gone"), configmap("c")),
            Request(GET, configmaps("c", namespace="{ns}-gone")),
        ),
        Difference(
            "this server does not check that a namespace exists (tests write into namespaces "
            'they never create); kube-apiserver answers 404 `namespaces "<ns>" not found`',
            testserver=[CREATED, OK],
            kube=[
                {"code": 404, "reason": "NotFound", "message": 'namespaces "NS-gone" not found'},
                {"code": 404, "reason": "NotFound", "message": 'configmaps "c" not found'},
            ],
        ),
    ),
    Row(
        "write-into-a-terminating-namespace",
        (
            Request(
                POST,
                configmaps(),
                {
                    **configmap("held"),
                    "metadata": {"name": "held", "finalizers": ["example.test/hold"]},
                },
            ),
            Request(DELETE, "/api/v1/namespaces/{ns}", pick=("status.phase",)),
            Request(POST, configmaps(), configmap("late")),
            Request(
                PATCH, configmaps("held"), {"metadata": {"finalizers": None}}, content_type=MERGE
            ),
        ),
        Difference(
            "this server deletes a namespace at once (no Terminating phase, no namespace "
            "controller); kube-apiserver keeps it Terminating while content remains and "
            "refuses new content with 403",
            testserver=[CREATED, {"code": 200, "status.phase": None}, CREATED, OK],
            kube=[
                CREATED,
                {"code": 200, "status.phase": "Terminating"},
                {
                    "code": 403,
                    "reason": "Forbidden",
                    "message": 'configmaps "late" is forbidden: unable to create new content '
                    "in namespace NS because it is being terminated",
                    "causes": [
                        (
                            "NamespaceTerminating",
                            "metadata.namespace",
                            "namespace NS is being terminated",
                        )
                    ],
                },
                OK,
            ],
        ),
    ),
]

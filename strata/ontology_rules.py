"""A graph's ontology record and the rules it puts on node and edge writes.

The ontology is one record per graph (kind ``GRAPH_ONTOLOGY``, keyed by the
graph name): its status (``draft`` or ``frozen``), its object types and its
link types.  Every ontology command rewrites the whole record, so a read at
any version sees the ontology of that version and its ``version`` is the
record's.  It exists from the first definition on, even when every type is
deleted again.

While the ontology is a draft nothing is enforced.  Once frozen, the engine
checks each node write (a declared ``object_type``, its required properties
present as keys; value types are hints and are not checked) and each edge
write (a declared link type; an endpoint that declares an object type must
be the link's source or target type, an untyped endpoint passes).

Also here: the node entity bindings (a node's link to a row of another
primitive), since node writes in three modules check them the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .store import GRAPH_ONTOLOGY, View

from .commands import check_branch_name, check_space
from . import names
from .errors import StrataError
from .names import check_name

if TYPE_CHECKING:
    from .engine import Engine
    from .store import Branch


def check_type_name(name: str) -> None:
    check_name(names.TYPE_NAME, name)


def check_property_defs(properties: dict | None) -> dict:
    """Property definitions as stored: names checked, value-type hints non-empty, sorted by name."""
    out = {}
    for name, definition in sorted((properties or {}).items()):
        check_name(names.PROPERTY_NAME, name)
        if definition.get("value_type") == "":
            raise StrataError("invalid_argument.engine.graph_type_hint",
                              "graph property value-type hint must not be empty")
        out[name] = definition
    return out


CARDINALITIES = ("one-to-one", "one-to-many", "many-to-one", "many-to-many")


def check_cardinality(value: str | None) -> None:
    if value is None:
        return
    if value == "":
        raise StrataError("invalid_argument.engine.graph_type_hint", "graph link cardinality hint must not be empty")
    if value not in CARDINALITIES:
        raise StrataError("invalid_argument.engine.graph_type_hint",
                          "graph link cardinality must be one of " + ", ".join(CARDINALITIES))


@dataclass(slots=True)
class Ontology:
    status: str = "draft"
    objects: dict[str, dict] = field(default_factory=dict)  # name -> property definitions
    links: dict[str, dict] = field(default_factory=dict)    # name -> {source, target, cardinality?, properties}
    version: int = 0

    @property
    def frozen(self) -> bool:
        return self.status == "frozen"

    def aux(self) -> str:
        return json.dumps({"status": self.status, "objects": self.objects, "links": self.links})

    def object_json(self, name: str) -> dict:
        out: dict = {"name": name}
        if self.objects[name]:
            out["properties"] = _defs_json(self.objects[name])
        return out

    def link_json(self, name: str) -> dict:
        link = self.links[name]
        out: dict = {"name": name, "source": link["source"], "target": link["target"]}
        if link.get("cardinality") is not None:
            out["cardinality"] = link["cardinality"]
        if link["properties"]:
            out["properties"] = _defs_json(link["properties"])
        return out


def _defs_json(defs: dict) -> dict:
    out = {}
    for name, d in defs.items():
        entry: dict = {}
        if d.get("value_type") is not None:
            entry["value_type"] = d["value_type"]
        entry["required"] = bool(d.get("required"))
        out[name] = entry
    return out


def load_ontology(e: Engine, view: View, space: str, graph: str) -> Ontology | None:
    entry = e.store.live(view, space, GRAPH_ONTOLOGY, graph.encode("utf-8"))
    if entry is None:
        return None
    raw = json.loads(entry.aux)
    return Ontology(raw["status"], raw["objects"], raw["links"], entry.version)


def save_ontology(tx, space: str, graph: str, onto: Ontology) -> None:
    tx.put(space, GRAPH_ONTOLOGY, graph.encode("utf-8"), b"", onto.aux())


def _frozen_rule(code: str, message: str) -> StrataError:
    return StrataError(f"failed_precondition.engine.{code}", message)


def check_node_against(onto: Ontology | None, object_type: str | None, properties: Any) -> None:
    """A node write under a frozen ontology: its type declared, its required properties present."""
    if onto is None or not onto.frozen or object_type is None:
        return
    if object_type not in onto.objects:
        raise _frozen_rule("graph_ontology_node_type",
                           f"node object type `{object_type}` is not declared in the frozen ontology")
    for name, definition in onto.objects[object_type].items():
        if definition.get("required") and (not isinstance(properties, dict) or name not in properties):
            raise _frozen_rule("graph_ontology_required_property",
                               f"node is missing required property `{name}` of object type `{object_type}`")


def check_edge_against(onto: Ontology | None, edge_type: str, src_type: str | None, dst_type: str | None) -> None:
    """An edge write under a frozen ontology: a declared link type between endpoints of its types."""
    if onto is None or not onto.frozen:
        return
    link = onto.links.get(edge_type)
    if link is None:
        raise _frozen_rule("graph_ontology_edge_type",
                           f"edge type `{edge_type}` is not a declared link type in the frozen ontology")
    for end, have in (("source", src_type), ("target", dst_type)):
        if have is not None and have != link[end]:
            raise _frozen_rule("graph_ontology_endpoint_type",
                               f"edge `{edge_type}` {end} must be `{link[end]}`, node is `{have}`")


# -- entity bindings ---------------------------------------------------------------------


def check_binding_target(target: dict, node_branch: str) -> dict:
    """A binding target as stored and shown (primitive, branch when given, space, key), checked."""
    check_space(target["space"])
    if target["key"] == "":
        raise StrataError("invalid_argument.engine.graph_binding", "graph binding key must not be empty")
    out: dict = {"primitive": target["primitive"]}
    if target.get("branch") is not None:
        check_branch_name(target["branch"])
        if target["branch"] != node_branch:
            raise StrataError(
                "unsupported.engine.graph_binding_cross_branch",
                f"graph relationship binding targets branch `{target['branch']}` but the node lives on branch "
                f"`{node_branch}`; cross-branch bindings are not supported")
        out["branch"] = target["branch"]
    out["space"] = target["space"]
    out["key"] = target["key"]
    return out


def check_binding(binding: dict | None, b: Branch) -> dict | None:
    if binding is None:
        return None
    return {"target": check_binding_target(binding["target"], b.name)}

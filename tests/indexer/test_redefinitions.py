"""A name defined twice in one scope keeps every definition: a setter beside its getter, an
overload, two trait impls' methods, a function defined under either branch of an ``if``.
Each later one gets a suffix (``size:set``, ``f:2``), so the graph holds them all, their
code is searched and ranked, and what they use is credited to them."""

from __future__ import annotations

from memstrata.compressor.symbol_names import resolve
from memstrata.indexer.parse import parse_source
from memstrata.indexer.workspace import Workspace

PY = b'''class Account:
    @property
    def balance(self):
        return self._balance

    @balance.setter
    def balance(self, value):
        if value < 0:
            raise ValueError("negative balance")
        self._balance = audit_balance(value)

    @balance.deleter
    def balance(self):
        del self._balance


if FAST:
    def checksum(data):
        return fast_sum(data)
else:
    def checksum(data):
        def step(acc, b):
            return acc + b
        return slow_sum(data, step)
'''

JS = b'''module.exports = {
  get body () {
    return this._body
  },
  set body (val) {
    this._body = normalizeBody(val)
  }
}
class Gauge {
  get level () { return this._level }
  set level (v) { this._level = clampLevel(v) }
}
'''

JAVA = b'''class Printer {
    void print(int n) { System.out.println(n); }
    void print(String s) { System.out.println(s.trim()); }
}
'''

RUST = b'''struct Point { x: i32 }
impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { write!(f, "{}", self.x) }
}
impl std::fmt::Debug for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { write!(f, "P{}", self.x) }
}
'''


def _names(language: str, path: str, source: bytes) -> list[tuple[str, int, int]]:
    return [(s.qualname, s.start_line, s.end_line) for s in parse_source(path, language, source).symbols]


def test_setters_deleters_and_conditional_definitions_in_python():
    assert _names("python", "account.py", PY) == [
        ("Account", 1, 14), ("Account.balance", 2, 4), ("Account.balance:set", 6, 10),
        ("Account.balance:delete", 12, 14), ("checksum", 18, 19), ("checksum:2", 21, 24),
        ("checksum:2.step", 22, 23)]


def test_accessors_overloads_and_trait_impls():
    assert _names("javascript", "body.js", JS) == [
        ("body", 2, 4), ("body:set", 5, 7), ("Gauge", 9, 12), ("Gauge.level", 10, 10), ("Gauge.level:set", 11, 11)]
    assert _names("java", "Printer.java", JAVA) == [("Printer", 1, 4), ("Printer.print", 2, 2),
                                                    ("Printer.print:2", 3, 3)]
    assert [q for q, _, _ in _names("rust", "point.rs", RUST)] == ["Point", "Point.fmt", "Point.fmt:2"]


def test_every_definition_is_in_the_graph_searchable_and_credited(tmp_path):
    (tmp_path / "account.py").write_bytes(PY)
    (tmp_path / "body.js").write_bytes(JS)
    with Workspace.open(tmp_path, workers=1) as ws:
        ws.index()
        graph = ws.graph
        setter = "account.py::Account.balance:set"
        assert setter in graph and "body.js::Gauge.level:set" in graph and "account.py::checksum:2.step" in graph
        # What the setter uses is the setter's, not the getter's.
        scopes = {scope for scope, name in ws.store.execute(
            "SELECT r.scope, r.name FROM refs r JOIN files f ON f.id = r.file_id WHERE f.path = 'account.py'")
            if name == "audit_balance"}
        assert scopes == {"Account.balance:set"}
        # Named as a property, both accessors answer; the suffix picks one.
        assert {m.node for m in resolve(graph, "Account.balance")} == {
            "account.py::Account.balance", setter, "account.py::Account.balance:delete"}
        assert [m.node for m in resolve(graph, "Account.balance:set")] == [setter]
        assert [m.node for m in resolve(graph, "balance:delete")] == ["account.py::Account.balance:delete"]


PLUGIN = b'''export function cachePlugin(options) {
  return {
    name: 'cache',
    transform: {
      order: 'pre',
      handler(code, id) {
        return rewriteImports(code, id)
      },
    },
    load: {
      handler: function (id) {
        return readCached(id)
      },
    },
    resolveId(id) { return id },
  }
}
export default {
  on: { click() { return 1 } },
  off: { click() { return 2 } },
}
'''


def test_object_literal_members_of_one_name_are_told_apart_by_their_keys():
    """Hooks of one name under different keys (`transform: { handler() {} }`, `load: { handler }`)
    are named by the keys that hold them, not `handler:2`: a question about the transform hook,
    or a search for `transform.handler`, can reach the one it means."""
    for language, path in (("javascript", "plugin.js"), ("typescript", "plugin.ts")):
        names = [q for q, _, _ in _names(language, path, PLUGIN)]
        assert "cachePlugin.transform.handler" in names and "cachePlugin.load.handler" in names, names
        assert "cachePlugin.resolveId" in names  # a name used once keeps its short form
        assert "on.click" in names and "off.click" in names, names
        assert not any(":2" in q for q in names), names

"""TypeScript declarations without a body and namespace blocks, through parse_source.

A `.d.ts` file (or a `declare` in a `.ts` file) states functions, constants and class members
with no body: each is a definition spanning its declaration.  An overload's signatures fold into
the implementation that follows them.  `namespace` / `module` blocks nest what they hold
(`Geometry.area`), as does `declare module 'lib'` (`lib.createClient`); `declare global` adds to
the global scope, so what it holds is named at the top level."""

from __future__ import annotations

from memstrata.indexer.parse import parse_definitions, parse_source

DECLARATIONS = b"""\
/** Formats a byte count. */
export declare function formatBytes(n: number): string
declare function trackEvent(name: string): void;
export declare const VERSION: string
declare var process: { env: Record<string, string> }
export const LIMIT: number;
export declare class Store {
  get(key: string): unknown
  static create(): Store
}
declare module 'analytics-lib' {
  export function createClient(key: string): Client
  export interface Client { send(event: string): void }
}
declare global {
  interface Window { analytics: unknown }
  function gtag(...args: unknown[]): void
}
"""


def _symbols(path: str, source: bytes) -> list[tuple]:
    return [(s.qualname, s.kind, s.start_line, s.end_line, s.parent, s.signature)
            for s in parse_source(path, "typescript", source).symbols]


def test_declarations_without_a_body_are_definitions():
    assert _symbols("types/lib.d.ts", DECLARATIONS) == [
        ("formatBytes", "function", 2, 2, None, "export declare function formatBytes(n: number): string"),
        ("trackEvent", "function", 3, 3, None, "declare function trackEvent(name: string): void;"),
        ("VERSION", "constant", 4, 4, None, "export declare const VERSION: string"),
        ("process", "constant", 5, 5, None, "declare var process: { env: Record<string, string> }"),
        ("LIMIT", "constant", 6, 6, None, "export const LIMIT: number"),
        ("Store", "class", 7, 10, None, "export declare class Store"),
        ("Store.get", "method", 8, 8, "Store", "get(key: string): unknown"),
        ("Store.create", "method", 9, 9, "Store", "static create(): Store"),
        ("analytics-lib", "module", 11, 14, None, "declare module 'analytics-lib'"),
        ("analytics-lib.createClient", "function", 12, 12, "analytics-lib",
         "export function createClient(key: string): Client"),
        ("analytics-lib.Client", "interface", 13, 13, "analytics-lib", "export interface Client"),
        ("analytics-lib.Client.send", "method", 13, 13, "analytics-lib.Client", "send(event: string): void"),
        ("Window", "interface", 16, 16, None, "interface Window"),
        ("gtag", "function", 17, 17, None, "function gtag(...args: unknown[]): void"),
    ]
    doc = {s.qualname: s.docstring for s in parse_source("types/lib.d.ts", "typescript", DECLARATIONS).symbols}
    assert doc["formatBytes"] == "Formats a byte count."
    # The outline's parse (definition patterns only) finds the same.
    assert parse_definitions("types/lib.d.ts", "typescript", DECLARATIONS) == \
        parse_source("types/lib.d.ts", "typescript", DECLARATIONS).symbols


def test_overload_signatures_fold_into_their_implementation_and_stay_without_one():
    """Next to an implementation, the signatures are not symbols of their own: the implementation
    is the definition, shown whole.  Declared only, every signature is a definition."""
    source = b"""\
export function parse(text: string): Doc;
export function parse(bytes: Uint8Array): Doc;
export function parse(input: string | Uint8Array): Doc {
  return build(input)
}
export class Reader {
  read(n: number): string;
  read(): string;
  read(n?: number): string {
    return take(n)
  }
  abstract close(): void;
}
export declare function pick(key: string): string
export declare function pick(index: number): string
"""
    assert [(q, k, a, b) for q, k, a, b, _, _ in _symbols("parse.ts", source)] == [
        ("parse", "function", 3, 5), ("Reader", "class", 6, 13), ("Reader.read", "method", 9, 11),
        ("Reader.close", "method", 12, 12), ("pick", "function", 14, 14), ("pick:2", "function", 15, 15)]


def test_namespaces_nest_what_they_hold():
    source = b"""\
export namespace Geometry {
  export function area(w: number, h: number): number {
    return w * h
  }
  export namespace Solid {
    export function volume(w: number): number { return area(w, w) * w }
  }
}
namespace Shapes {
  export function area(r: number): number {
    return 3.14 * r * r
  }
}
namespace Shapes {
  export function circumference(r: number) { return 6.28 * r }
}
module Legacy.Units {
  export function toMeters(x: number) { return x }
}
"""
    assert [(q, k, a, b, p) for q, k, a, b, p, _ in _symbols("ns.ts", source)] == [
        ("Geometry", "module", 1, 8, None),
        ("Geometry.area", "function", 2, 4, "Geometry"),
        ("Geometry.Solid", "module", 5, 7, "Geometry"),
        ("Geometry.Solid.volume", "function", 6, 6, "Geometry.Solid"),
        ("Shapes", "module", 9, 13, None),
        ("Shapes.area", "function", 10, 12, "Shapes"),
        # A namespace opened again is the same namespace (declaration merging).
        ("Shapes:2", "module", 14, 16, None),
        ("Shapes.circumference", "function", 15, 15, "Shapes:2"),
        # `module A.B {}` is `B` inside `A`.
        ("Legacy.Units", "module", 17, 19, None),
        ("Legacy.Units.toMeters", "function", 18, 18, "Legacy.Units"),
    ]
    # Inside its namespace a sibling is called bare.
    assert ("area", "Geometry.Solid.volume") in {(r.name, r.scope) for r in parse_source(
        "ns.ts", "typescript", source).refs}

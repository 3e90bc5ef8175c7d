"""Where a context slice's tokens go (issue 20): what the rendered slice spends its budget on.

Runs ``bench/quality.py`` (same options, cases and scratch checkouts; its own report is printed
first) and classifies every line of each ``context_query`` slice, commit cases and plain-English
questions alike:

* body: a line of a definition shown whole (``full_symbols``);
* signature: a line of a definition shown as its signature (decorators and declaration);
* note: the elision note under a signature (``... 12 lines elided: <first docstring line>``)
  and a run of decorators cut short (``... 28 lines of decorators elided``);
* gap marker: ``... lines 40-87 omitted`` between shown spans, at a file's start and end;
* header: a file's ``# path`` line;
* import: an import line that ties the file to another file of the slice;
* frame/other: an enclosing class's or ``impl``'s header line, a short gap shown as it is;
* blank: a blank line between definitions or before a marker.

Each line is counted with its newline (cl100k, as the slice is counted; the sum per slice is
within a few per cent of the slice's exact count).  Printed per repository: the share of the
tokens of each kind, the tokens per slice, and per slice the number of gap markers, how many of
them cost at least what the lines they hide would (the marker and the blank line before it
against those lines), and how many elision notes cost at least the body they stand for.

    python bench/slice_composition.py --repos CORPORA/repos/{click,rich,cobra,tokio} \\
        --cases-per-repo 25 --english-per-repo 15 --scratch /tmp/quality
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality as Q  # noqa: E402

from memstrata.compressor.render import comment_prefix  # noqa: E402
from memstrata.compressor.tokens import count_tokens_memo  # noqa: E402
from memstrata.storage import code_index as ci  # noqa: E402

KINDS = ("body", "signature", "note", "gap marker", "header", "import", "frame/other", "blank")
_MARKER = re.compile(r"^\s*(?:#|//) \.\.\. (?:lines? (?P<a>\d+)(?:-(?P<b>\d+))? omitted"
                     r"|(?P<decorators>\d+) lines of decorators elided"
                     r"|(?P<elided>\d+) lines? elided\b.*)$")
_IMPORT = re.compile(r"^(?:import\b|from\s+\S+\s+import\b|use\s|pub\s+use\s|export\s.*\bfrom\b|const\s.*=\s*require\()")


def composition(sl, graph, texts: dict[str, list[str]]) -> tuple[Counter, Counter]:
    """(tokens by kind, counts) of one slice; ``texts`` holds the lines of each file it shows."""
    tokens: Counter = Counter()
    counts: Counter = Counter()
    full = set(sl.full_symbols)
    spans: dict[str, list[tuple[int, int, bool]]] = {}
    for node in sl.symbols:
        if node in graph:
            d = graph.node(node)
            spans.setdefault(d["path"], []).append((d["start_line"], d["end_line"], node in full))
    headers = {f"{comment_prefix(graph.node(p).get('language') or '')} {p}": p for p in sl.sources if p in graph}
    lines = sl.context.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    source: list[str] = []
    path = None
    at = 0  # the source line (0-based) the next shown line is looked for from
    for i, line in enumerate(lines):
        n = count_tokens_memo(line + "\n")
        if line in headers and (i == 0 or not lines[i - 1].strip()):
            path = headers[line]
            source, at = texts.get(path, []), 0
            tokens["header"] += n
            continue
        m = _MARKER.match(line)
        if path is not None and m:
            if m.group("a"):
                a, b = int(m.group("a")), int(m.group("b") or m.group("a"))
                hidden = "\n".join(source[a - 1 : b])
                blank = 1 if i and not lines[i - 1].strip() else 0
                counts["gap markers"] += 1
                if count_tokens_memo(hidden) <= n + blank:
                    counts["gap markers costing what they hide"] += 1
                tokens["gap marker"] += n
                at = b
            else:
                k = int(m.group("decorators") or m.group("elided"))
                if m.group("elided"):
                    counts["elision notes"] += 1
                    if count_tokens_memo("\n".join(source[at : at + k])) <= n:
                        counts["notes costing what they hide"] += 1
                tokens["note"] += n
                at += k
            continue
        if not line.strip() and not (at < len(source) and not source[at].strip()):
            tokens["blank"] += n
            continue
        k = next((j for j in range(at, len(source)) if source[j] == line), None)
        if k is None:
            tokens["frame/other"] += n
            continue
        at = k + 1
        in_spans = [whole for s, e, whole in spans.get(path, ()) if s <= k + 1 <= e]
        if not line.strip():
            tokens["body" if any(in_spans) else "blank"] += n
        elif any(in_spans):
            tokens["body"] += n
        elif in_spans:
            tokens["signature"] += n
        elif _IMPORT.match(line):
            tokens["import"] += n
        else:
            tokens["frame/other"] += n
    counts["slices"] = 1
    counts["files"] = len(sl.sources)
    counts["whole"] = len(full)
    counts["signatures"] = len(set(sl.symbols) - full)
    return tokens, counts


def main(argv: list[str] | None = None) -> int:
    by_repo: dict[str, tuple[Counter, Counter]] = {}
    query = Q.context_query

    def measured(ws, question, *args, **kwargs):
        sl = query(ws, question, *args, **kwargs)
        graph = ws.graph
        texts = {p: (ci.file_text(ws.store, p) or "").split("\n") for p in sl.sources}
        tokens, counts = composition(sl, graph, texts)
        t, c = by_repo.setdefault(ws.root.name, (Counter(), Counter()))
        t.update(tokens)
        c.update(counts)
        return sl

    Q.context_query = measured
    code = Q.main(argv)
    out = sys.stdout
    print("\nWhere the slices' tokens go (share of the tokens of every line, each with its newline)", file=out)
    print("repo".ljust(14) + "".join(k.rjust(12) for k in KINDS) + "  tok/slice  files  whole   sigs  markers"
          "  >=hidden  notes  >=body", file=out)
    total_t, total_c = Counter(), Counter()
    for name, (t, c) in [*by_repo.items(), ("all", (total_t, total_c))]:
        if name != "all":
            total_t.update(t)
            total_c.update(c)
        s = sum(t.values()) or 1
        n = c["slices"] or 1
        print(name[:14].ljust(14) + "".join(f"{100 * t[k] / s:11.1f}%" for k in KINDS)
              + f"  {s / n:9.0f}  {c['files'] / n:5.1f}  {c['whole'] / n:5.1f}  {c['signatures'] / n:5.1f}"
              + f"  {c['gap markers'] / n:7.1f}  {c['gap markers costing what they hide'] / n:8.1f}"
              + f"  {c['elision notes'] / n:5.1f}  {c['notes costing what they hide'] / n:6.2f}", file=out)
    return code


if __name__ == "__main__":
    sys.exit(main())

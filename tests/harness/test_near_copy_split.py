"""A re-read forwarded as pointers never splits a definition between a pointer and lines shown here."""

from __future__ import annotations

from memstrata.compressor.block import Block
from memstrata.harness.proxy.compaction import near_copy_form


def _source(changed: bool) -> list[str]:
    lines: list[str] = []
    for i in range(8):
        lines += [f"def step_{i}(values):", f"    total = {i}"]
        lines += [f"    total += values[{k}] * {k + i}" for k in range(10)]
        lines += ["    return total", ""]
    if changed:
        lines[lines.index("def step_7(values):") + 1] = "    total = -7"
    return lines


def _block(lines: list[str]) -> Block:
    display = [f"{n:>6}\t{line}" for n, line in enumerate(lines, 1)]
    return Block(display, lines, list(range(1, len(lines) + 1)), "python", "pkg/steps.py")


def test_a_definition_the_earlier_form_shows_in_part_is_shown_whole_here():
    earlier, now = _block(_source(False)), _block(_source(True))
    start = earlier.code.index("def step_3(values):")
    end = earlier.code.index("def step_4(values):") - 1
    # The earlier read went out cut in the middle of step_3: its first half is
    # in that form, the rest behind a marker.
    visible = set(range(len(earlier.code))) - set(range(start + 6, end + 1))
    form, _ = near_copy_form(now, [(earlier, visible, "toolu_1")], "pkg/steps.py")
    assert form is not None and "[memstrata: lines" in form
    out = form.split("\n")
    body = now.display[start:end]
    at = out.index(body[0])
    assert out[at:at + len(body)] == body  # step_3 whole, in one place, here
    # Every other definition is whole here or inside a single pointer.
    for i in range(8):
        header = now.display[now.code.index(f"def step_{i}(values):")]
        if header in out:
            k = out.index(header)
            assert all("[memstrata:" not in line for line in out[k:k + 13]), i
    assert now.display[now.code.index("    total = -7")] in out  # the changed line is shown


def _settings_class(added: bool) -> list[str]:
    """A class whose body is mostly attributes, each a paragraph of its own, and one method."""
    lines = ["class Settings:", '    """Options read from the environment."""', ""]
    for i in range(30):
        lines += [f"    #: option {i}, read once at start-up", f"    option_{i} = env_property(", f'        "OPT_{i}",',
                  f"        default={i},", "    )", ""]
    lines += ["    def load(self, environ):", "        for key in environ:", "            self.seen.add(key)",
              "        return self", ""]
    if added:  # a new attribute in the middle of the class body, as a commit adds an option
        at = lines.index("    option_15 = env_property(") - 1
        lines[at:at] = ["    #: the new option", "    option_new = env_property(", '        "OPT_NEW",',
                        "        default=None,", "    )", ""]
    return lines


def test_a_new_class_attribute_shows_its_paragraph_not_every_attribute():
    earlier, now = _block(_settings_class(False)), _block(_settings_class(True))
    form, _ = near_copy_form(now, [(earlier, None, "toolu_1")], "pkg/settings.py")
    assert form is not None
    out = form.split("\n")
    new = [now.display[k] for k, line in enumerate(now.code) if "option_new" in line or "OPT_NEW" in line]
    assert all(line in out for line in new)  # the change is shown, verbatim
    # The other attributes are behind pointers, not repeated: a class frame's attributes are not
    # one definition to be shown whole because one of them changed.
    assert now.display[now.code.index("    option_3 = env_property(")] not in out
    assert now.display[now.code.index("    option_28 = env_property(")] not in out
    assert len(form) < len("\n".join(now.display)) / 3
    # Expanded, the re-read is the file as it is now.
    expanded: list[str] = []
    for line in out:
        if line.strip().startswith("[memstrata: lines"):  # a pointer (indented like the code around it)
            first, last = (int(x) for x in line.split()[2].split("-"))
            expanded += [now.display[k - 1] for k in range(first, last + 1)]
        else:
            expanded.append(line)
    assert expanded == now.display

"""A class's name names its constructors too (Java, C#): a use of the name is a use of the
class, and a constructor's uses are where its class is made.  A Java package's files see each
other's classes unimported, as a Go package's do."""

from __future__ import annotations

import pytest

from memstrata.compressor.navigation import find_references

from ..conftest import indexed_workspace

JAVA = {
    "src/shop/Builder.java": """package shop;

public class Builder {
    private int size;

    public Builder() {
        this.size = 1;
    }

    public Builder(Builder other) {
        this.size = other.size;
    }

    public Cart build() {
        return new Cart(this);
    }
}
""",
    "src/shop/Cart.java": """package shop;

public class Cart {
    private final Builder from;

    public Cart(Builder from) {
        this.from = from;
    }

    public static Cart empty() {
        return new Builder().build();
    }
}
""",
    "src/app/Main.java": """package app;

import shop.Builder;

public class Main {
    public static void main(String[] args) {
        Builder b = new Builder();
        b.build();
    }
}
""",
}

CSHARP = {
    "src/Options/Option.cs": """namespace Tool.Options
{
    public class Option
    {
        public Option() { }

        public Option(string name) { Name = name; }

        public string Name;
    }
}
""",
    "src/Parsing/Parser.cs": """using Tool.Options;

namespace Tool.Parsing
{
    public class Parser
    {
        public Option Parse(string text)
        {
            return new Option(text);
        }
    }
}
""",
}

BUILDER = "src/shop/Builder.java::Builder"


@pytest.fixture
def java(tmp_path):
    ws = indexed_workspace(tmp_path / "java", JAVA)
    yield ws
    ws.close()


def _into(ws, node):
    return {(n.node, n.kind) for n in ws.graph.neighbors(node, ("calls", "references"), "in")}


def test_a_java_class_with_constructors_is_what_its_name_means(java):
    into = _into(java, BUILDER)
    assert ("src/shop/Cart.java::Cart.empty", "calls") in into  # same package, no import
    assert ("src/shop/Cart.java::Cart.Cart", "references") in into  # a parameter's type
    assert ("src/app/Main.java::Main.main", "calls") in into  # imported
    assert ("src/shop/Builder.java::Builder.Builder:2", "references") in into  # inside the class itself
    for ctor in ("Builder.Builder", "Builder.Builder:2"):
        assert _into(java, f"src/shop/Builder.java::{ctor}") == set()
    assert ("src/shop/Builder.java::Builder.build", "calls") in _into(java, "src/shop/Cart.java::Cart")


def test_a_constructors_uses_are_where_its_class_is_made(java):
    result = find_references(java, "Builder.Builder")
    got = {(r["path"], r["line"], r["kind"]) for r in result["references"]}
    assert got == {("src/shop/Cart.java", 11, "call"), ("src/app/Main.java", 7, "call")}  # no import, no type


def test_a_csharp_class_with_constructors_is_what_its_name_means(tmp_path):
    ws = indexed_workspace(tmp_path / "cs", CSHARP)
    try:
        into = _into(ws, "src/Options/Option.cs::Option")
        assert {("src/Parsing/Parser.cs::Parser.Parse", "calls"),
                ("src/Parsing/Parser.cs::Parser.Parse", "references")} <= into
        assert _into(ws, "src/Options/Option.cs::Option.Option:2") == set()
    finally:
        ws.close()


def test_a_csharp_attribute_is_a_use_of_its_attribute_class(tmp_path):
    ws = indexed_workspace(tmp_path / "attr", {
        "src/OptionAttribute.cs": "namespace Tool\n{\n    public class OptionAttribute : System.Attribute\n"
                                  "    {\n        public OptionAttribute(string name) { }\n    }\n}\n",
        "src/Kinds.cs": "namespace Tool\n{\n    public enum Kind { Option, Value }\n}\n",
        "src/Settings.cs": "namespace Tool\n{\n    public class Settings\n    {\n"
                           "        [Option(\"verbose\")]\n        public bool Verbose { get; set; }\n    }\n}\n",
    })
    try:
        into = {n.node for n in ws.graph.neighbors("src/OptionAttribute.cs::OptionAttribute", ("references",), "in")}
        assert into == {"src/Settings.cs::Settings.Verbose"}  # not the enum member spelled `Option`
    finally:
        ws.close()

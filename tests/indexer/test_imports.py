"""Import extraction (one fact per binding) and resolution to project files."""

from __future__ import annotations

from pathlib import Path

import pytest
import tree_sitter as ts

from memstrata.indexer.imports import build_resolve_context, extract_imports, resolve_import, resolve_import_all
from memstrata.indexer.languages import get_language, get_parser, get_query, language_for_path
from memstrata.indexer.model import ImportFact

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# python.scm belongs to the Python query owner; these tests only need the
# import statements, so they select them directly.
_PY_IMPORTS = "(import_statement) @import (import_from_statement) @import"


def _imports(language: str, source: bytes) -> list[tuple]:
    tree = get_parser(language).parse(source)
    if language == "python":
        query = ts.Query(get_language("python"), _PY_IMPORTS)
    else:
        query = get_query(language)
    facts: list[ImportFact] = []
    for _, caps in ts.QueryCursor(query).matches(tree.root_node):
        for node in caps.get("import", []):
            facts.extend(extract_imports(language, node, source))
    return [(f.module, f.name, f.alias, f.line) for f in facts]


EXTRACTION = {
    "python": (
        "import a.b, c as d\n"
        "from ..pkg import x as y, z\n"
        "from . import mod\n"
        "from x import *\n"
        "from .m import (p, q)\n",
        [
            ("a.b", None, None, 1),
            ("c", None, "d", 1),
            ("..pkg", "x", "y", 2),
            ("..pkg", "z", None, 2),
            (".", "mod", None, 3),
            ("x", "*", None, 4),
            (".m", "p", None, 5),
            (".m", "q", None, 5),
        ],
    ),
    "javascript": (
        "import D, {a as b, c} from './x';\n"
        'import * as ns from "./y";\n'
        "import './side';\n"
        "const r = require('./z');\n"
        "const {q, w: ww} = require('./w');\n"
        "export {a, b as bb} from './x';\n"
        "export * from './all';\n"
        "export * as nn from './all';\n"
        "const m = import('./dyn');\n"
        "other('./not-an-import');\n",
        [
            ("./x", "default", "D", 1),
            ("./x", "a", "b", 1),
            ("./x", "c", None, 1),
            ("./y", None, "ns", 2),
            ("./side", None, None, 3),
            ("./z", None, "r", 4),
            ("./w", "q", None, 5),
            ("./w", "w", "ww", 5),
            ("./x", "a", None, 6),
            ("./x", "b", "bb", 6),
            ("./all", "*", None, 7),
            ("./all", None, "nn", 8),
            ("./dyn", None, None, 9),
        ],
    ),
    "typescript": (
        "import type { T } from './t';\nimport fs = require('fs');\nexport type { U } from './u';\n",
        [("./t", "T", None, 1), ("fs", None, "fs", 2), ("./u", "U", None, 3)],
    ),
    "tsx": ("import React from 'react';\n", [("react", "default", "React", 1)]),
    "go": (
        'package a\nimport "fmt"\nimport (\n  h "example.com/app/hash"\n  _ "x/y"\n  . "z/w"\n)\n',
        [
            ("fmt", None, None, 2),
            ("example.com/app/hash", None, "h", 4),
            ("x/y", None, "_", 5),
            ("z/w", None, ".", 6),
        ],
    ),
    "rust": (
        "use crate::a::b::{c, d as e, f::{g, self}};\n"
        "use super::x;\n"
        "use std::io;\n"
        "use self::m::*;\n"
        "use ::abs::p as q;\n"
        "use foo;\n"
        "pub mod foo;\n"
        "mod inner { fn z() {} }\n",
        [
            ("crate::a::b", "c", None, 1),
            ("crate::a::b", "d", "e", 1),
            ("crate::a::b::f", "g", None, 1),
            ("crate::a::b", "f", None, 1),
            ("super", "x", None, 2),
            ("std", "io", None, 3),
            ("self::m", "*", None, 4),
            ("::abs", "p", "q", 5),
            ("foo", None, None, 6),
            ("self::foo", None, None, 7),
        ],
    ),
    "java": (
        "import java.util.List;\nimport static com.acme.util.Hash.sha;\nimport com.acme.model.*;\n"
        "import static org.junit.Assert.*;\n",
        [
            ("java.util", "List", None, 1),
            ("com.acme.util.Hash", "sha", None, 2),
            ("com.acme.model", "*", None, 3),
            ("org.junit.Assert", "*", None, 4),
        ],
    ),
    "c": (
        '#include <stdio.h>\n#include "auth/hash.h"\n#include MACRO_HEADER\n',
        [("<stdio.h>", None, None, 1), ("auth/hash.h", None, None, 2)],
    ),
    "cpp": ('#include <vector>\n#include "a.hpp"\n', [("<vector>", None, None, 1), ("a.hpp", None, None, 2)]),
    "csharp": (
        "using System;\nusing H = Acme.Util.Hasher;\nusing static System.Math;\nglobal using Foo.Bar;\n",
        [
            ("System", None, None, 1),
            ("Acme.Util.Hasher", None, "H", 2),
            ("System.Math", None, None, 3),
            ("Foo.Bar", None, None, 4),
        ],
    ),
    "ruby": (
        "require 'json'\nrequire_relative '../lib/hash'\nrequire_relative 'session'\n"
        "x.require 'no'\nrequire \"a/#{b}\"\n",
        [("json", None, None, 1), ("../lib/hash", None, None, 2), ("./session", None, None, 3)],
    ),
    "php": (
        "<?php\n"
        "use App\\Models\\User;\n"
        "use App\\Util\\{Hash, Str as S};\n"
        "use function App\\Util\\helper;\n"
        "use Foo as Bar;\n"
        "require_once __DIR__ . '/bootstrap.php';\n"
        "require 'config.php';\n"
        'include_once("lib/x.php");\n'
        "require $dynamic;\n",
        [
            ("App\\Models", "User", None, 2),
            ("App\\Util", "Hash", None, 3),
            ("App\\Util", "Str", "S", 3),
            ("App\\Util", "helper", None, 4),
            ("Foo", None, "Bar", 5),
            ("./bootstrap.php", None, None, 6),
            ("config.php", None, None, 7),
            ("lib/x.php", None, None, 8),
        ],
    ),
}


@pytest.mark.parametrize("language", list(EXTRACTION))
def test_extract_imports(language):
    source, expected = EXTRACTION[language]
    assert _imports(language, source.encode()) == expected


def test_unknown_language_extracts_nothing():
    tree = get_parser("go").parse(b"package a")
    assert extract_imports("cobol", tree.root_node, b"package a") == []


# -- resolution over the fixture projects -------------------------------------


def _project(name: str):
    root = FIXTURES / name
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and language_for_path(p.name)]
    return root, build_resolve_context(root, files)


def _resolutions(name: str) -> dict[tuple[str, str, str | None], str | None]:
    root, ctx = _project(name)
    out = {}
    for rel in sorted(ctx.files):
        language = language_for_path(rel)
        for module, imported, _alias, line in _imports(language, (root / rel).read_bytes()):
            fact = ImportFact(module=module, name=imported, alias=_alias, line=line)
            out[(rel, module, imported)] = resolve_import(language, fact, rel, ctx)
    return out


RESOLUTION = {
    "python_imports": {
        ("scripts/run.py", "helper", None): "scripts/helper.py",
        ("scripts/run.py", "shop.payments", None): "src/shop/payments/__init__.py",
        ("scripts/run.py", "shop.payments.refunds", "refund"): "src/shop/payments/refunds.py",
        ("src/shop/__init__.py", ".models", "Item"): "src/shop/models.py",
        ("src/shop/__init__.py", ".models", "Order"): "src/shop/models.py",
        ("src/shop/__init__.py", ".", "pricing"): "src/shop/pricing.py",
        ("src/shop/models.py", "dataclasses", "dataclass"): None,
        ("src/shop/payments/__init__.py", ".gateway", "charge"): "src/shop/payments/gateway.py",
        ("src/shop/payments/gateway.py", "os.path", None): None,
        ("src/shop/payments/gateway.py", "shop.pricing", None): "src/shop/pricing.py",
        ("src/shop/payments/gateway.py", "shop", "models"): "src/shop/models.py",
        ("src/shop/payments/gateway.py", "..pricing", "total"): "src/shop/pricing.py",
        ("src/shop/payments/gateway.py", "..", "Item"): "src/shop/__init__.py",
        ("src/shop/payments/refunds.py", ".", "gateway"): "src/shop/payments/gateway.py",
        ("src/shop/payments/refunds.py", ".gateway", "*"): "src/shop/payments/gateway.py",
        ("src/shop/payments/refunds.py", "...outside", "nothing"): None,
        ("src/shop/pricing.py", "shop.models", "Order"): "src/shop/models.py",
    },
    "javascript_project": {
        ("src/app.js", "./middleware", "default"): "src/middleware/index.js",
        ("src/app.js", "./polyfills", None): None,
        ("src/app.js", "./routes/login.js", None): "src/routes/login.js",
        ("src/auth.js", "./hash.js", "verifyPassword"): "src/hash.js",
        ("src/auth.js", "./hash.js", "SALT_ROUNDS"): "src/hash.js",
        ("src/auth.js", "./store", None): "src/store.js",
        ("src/hash.js", "crypto", "default"): None,
        ("src/middleware/index.js", "../auth.js", "Session"): "src/auth.js",
        ("src/routes/login.js", "../auth", "AuthService"): "src/auth.js",
        ("src/routes/login.js", "../store", None): "src/store.js",
    },
    "typescript_project": {
        ("src/auth.ts", "./hash.js", "hash"): "src/hash.ts",  # ESM-style .js -> .ts
        ("src/auth.ts", "models", "User"): "src/models.ts",  # tsconfig baseUrl
        ("src/auth.ts", "models", "UserId"): "src/models.ts",
        ("src/routes.tsx", "./auth.js", "AuthService"): "src/auth.ts",
        ("src/routes.tsx", "./auth.js", "Session"): "src/auth.ts",
        ("src/routes.tsx", "./models", "Role"): "src/models.ts",
    },
    "go_project": {
        ("auth/service.go", "errors", None): None,
        ("auth/service.go", "example.com/authsvc/hash", None): "hash/hash.go",
        ("auth/service_test.go", "testing", None): None,
        ("cmd/server/main.go", "fmt", None): None,
        ("cmd/server/main.go", "example.com/authsvc/auth", None): "auth/service.go",
        ("hash/hash.go", "crypto/sha256", None): None,
        ("hash/hash.go", "encoding/hex", None): None,
    },
    "rust_project": {
        ("src/auth/mod.rs", "self::service", None): "src/auth/service.rs",
        ("src/auth/mod.rs", "self::session", None): "src/auth/session.rs",
        ("src/auth/mod.rs", "self::session", "Session"): "src/auth/session.rs",
        ("src/auth/service.rs", "std::collections", "HashMap"): None,
        ("src/auth/service.rs", "super::session", "Session"): "src/auth/session.rs",
        ("src/auth/service.rs", "super", "Authenticator"): "src/auth/mod.rs",
        ("src/auth/service.rs", "crate::hash", "hash_password"): "src/hash.rs",
        ("src/auth/service.rs", "crate::hash", "ROUNDS"): "src/hash.rs",
        ("src/main.rs", "self::auth", None): "src/auth/mod.rs",
        ("src/main.rs", "self::hash", None): "src/hash.rs",
        ("src/main.rs", "crate::auth::service", "AuthService"): "src/auth/service.rs",
        ("src/main.rs", "std::collections", "HashMap"): None,
    },
    "java_project": {
        (
            "src/main/java/com/acme/auth/AuthService.java",
            "com.acme.util.Hash",
            "sha",
        ): "src/main/java/com/acme/util/Hash.java",
        ("src/main/java/com/acme/auth/AuthService.java", "java.util", "Map"): None,
        ("src/main/java/com/acme/auth/BaseService.java", "java.util", "Map"): None,
        (
            "src/main/java/com/acme/web/LoginController.java",
            "com.acme.auth",
            "*",
        ): "src/main/java/com/acme/auth/AuthService.java",
        (
            "src/main/java/com/acme/web/LoginController.java",
            "com.acme.util",
            "Hash",
        ): "src/main/java/com/acme/util/Hash.java",
        ("src/main/java/com/acme/web/LoginController.java", "java.util", "HashMap"): None,
    },
    "c_project": {
        ("src/auth.c", "<string.h>", None): None,
        ("src/auth.c", "auth.h", None): "src/auth.h",
        ("src/auth.h", "hash.h", None): "src/hash.h",
        ("src/hash.c", "hash.h", None): "src/hash.h",
        ("src/main.c", "<stdio.h>", None): None,
        ("src/main.c", "auth.h", None): "src/auth.h",
    },
    "cpp_project": {
        ("include/auth/service.hpp", "<string>", None): None,
        ("include/auth/service.hpp", "auth/session.hpp", None): "include/auth/session.hpp",
        ("include/auth/session.hpp", "<string>", None): None,
        ("src/main.cpp", "<iostream>", None): None,
        ("src/main.cpp", "auth/service.hpp", None): "include/auth/service.hpp",
        ("src/service.cpp", "auth/service.hpp", None): "include/auth/service.hpp",
        ("src/service.cpp", "<functional>", None): None,
    },
    "csharp_project": {
        ("src/Auth/AuthService.cs", "System.Collections.Generic", None): None,
        ("src/Auth/AuthService.cs", "Acme.Util", None): "src/Util/Hasher.cs",
        ("src/Web/LoginController.cs", "System.Collections.Generic", None): None,
        ("src/Web/LoginController.cs", "Acme.Auth", None): "src/Auth/AuthService.cs",
        ("src/Web/LoginController.cs", "Acme.Util.Hasher", None): "src/Util/Hasher.cs",
    },
    "ruby_project": {
        ("app/routes.rb", "../lib/auth", None): "lib/auth.rb",
        ("lib/auth.rb", "./auth/service", None): "lib/auth/service.rb",
        ("lib/auth.rb", "./auth/session", None): "lib/auth/session.rb",
        ("lib/auth/hashing.rb", "digest", None): None,
        ("lib/auth/service.rb", "./hashing", None): "lib/auth/hashing.rb",
        ("lib/auth/service.rb", "auth/session", None): "lib/auth/session.rb",
    },
    "php_project": {
        ("public/index.php", "./../src/bootstrap.php", None): "src/bootstrap.php",
        ("public/index.php", "App\\Models", "User"): "src/Models/User.php",
        ("src/Auth/AuthService.php", "App\\Models", "User"): "src/Models/User.php",
        ("src/Auth/AuthService.php", "App\\Util", "Hash"): "src/Util/Hash.php",
        ("src/Auth/AuthService.php", "App\\Util", "Str"): None,
        ("src/Auth/Authenticator.php", "App\\Models", "User"): "src/Models/User.php",
        ("src/bootstrap.php", "./Models/User.php", None): "src/Models/User.php",
        ("src/bootstrap.php", "./Util/Hash.php", None): "src/Util/Hash.php",
        ("src/bootstrap.php", "Auth/Authenticator.php", None): "src/Auth/Authenticator.php",
        ("src/bootstrap.php", "Auth/AuthService.php", None): "src/Auth/AuthService.php",
    },
}


@pytest.mark.parametrize("project", list(RESOLUTION))
def test_resolve_fixture_imports(project):
    assert _resolutions(project) == RESOLUTION[project]


def test_python_roots_include_src_layout():
    _, ctx = _project("python_imports")
    assert ctx.python_roots == ("", "src")


def test_go_context_reads_go_mod_and_lists_whole_package():
    _, ctx = _project("go_project")
    assert ctx.go_modules == (("example.com/authsvc", ""),)
    fact = ImportFact("example.com/authsvc/auth", None, None, 1)
    # test files are not part of the package an importer sees
    assert resolve_import_all("go", fact, "cmd/server/main.go", ctx) == ["auth/service.go", "auth/session.go"]


def test_java_wildcard_lists_whole_package():
    _, ctx = _project("java_project")
    fact = ImportFact("com.acme.auth", "*", None, 1)
    base = "src/main/java/com/acme/auth/"
    assert resolve_import_all("java", fact, "x.java", ctx) == [
        base + n for n in ("AuthService.java", "Authenticator.java", "BaseService.java", "Role.java", "Session.java")
    ]


def test_csharp_namespace_lists_its_directory():
    _, ctx = _project("csharp_project")
    fact = ImportFact("Acme.Auth", None, None, 1)
    assert resolve_import_all("csharp", fact, "src/Web/LoginController.cs", ctx) == [
        "src/Auth/AuthService.cs",
        "src/Auth/IAuthenticator.cs",
    ]


def test_rust_nested_module_files_and_super_chains(tmp_path):
    files = ["src/lib.rs", "src/a.rs", "src/a/b.rs", "src/a/b/c/mod.rs", "src/util.rs"]
    ctx = build_resolve_context(tmp_path, files)
    cases = [
        ("src/a.rs", ImportFact("self::b", None, None, 1), "src/a/b.rs"),  # `mod b;` in a non-mod.rs file
        ("src/a/b.rs", ImportFact("self::c", None, None, 1), "src/a/b/c/mod.rs"),
        ("src/a/b/c/mod.rs", ImportFact("super::super", "Thing", None, 1), "src/a.rs"),
        ("src/a/b/c/mod.rs", ImportFact("crate::util", "helper", None, 1), "src/util.rs"),
        ("src/a/b.rs", ImportFact("crate", "Root", None, 1), "src/lib.rs"),
        ("src/a/b.rs", ImportFact("serde", "Serialize", None, 1), None),
    ]
    for from_path, fact, expected in cases:
        assert resolve_import("rust", fact, from_path, ctx) == expected, (from_path, fact)


def test_python_package_import_does_not_fall_back_to_siblings(tmp_path):
    # Inside a package, `import utils` is absolute (no implicit relative imports).
    files = ["pkg/__init__.py", "pkg/a.py", "pkg/utils.py"]
    ctx = build_resolve_context(tmp_path, files)
    assert resolve_import("python", ImportFact("utils", None, None, 1), "pkg/a.py", ctx) is None
    assert resolve_import("python", ImportFact("pkg.utils", None, None, 1), "pkg/a.py", ctx) == "pkg/utils.py"


def test_c_include_falls_back_to_unique_suffix(tmp_path):
    files = ["lib/net/socket.h", "app/main.c", "a/util.h", "b/util.h"]
    ctx = build_resolve_context(tmp_path, files)
    assert resolve_import("c", ImportFact("net/socket.h", None, None, 1), "app/main.c", ctx) == "lib/net/socket.h"
    assert resolve_import("c", ImportFact("util.h", None, None, 1), "app/main.c", ctx) is None  # ambiguous


def test_an_angle_include_of_the_projects_own_header(tmp_path):
    files = ["hiredis.h", "examples/example.c", "include/fmt/core.h", "compat/string.h", "src/x/net/sock.h"]
    ctx = build_resolve_context(tmp_path, files)

    def resolve(header):
        return resolve_import("c", ImportFact(f"<{header}>", None, None, 1), "examples/example.c", ctx)

    assert resolve("hiredis.h") == "hiredis.h"
    assert resolve("fmt/core.h") == "include/fmt/core.h"
    assert resolve("net/sock.h") == "src/x/net/sock.h"
    assert resolve("string.h") is None  # the system header, not the project's namesake
    assert resolve("stdio.h") is None


def test_js_directory_index_and_no_bare_packages(tmp_path):
    files = ["src/a.ts", "src/lib/index.tsx", "src/types.d.ts"]
    ctx = build_resolve_context(tmp_path, files)
    assert resolve_import("typescript", ImportFact("./lib", None, None, 1), "src/a.ts", ctx) == "src/lib/index.tsx"
    assert resolve_import("typescript", ImportFact("./types", None, None, 1), "src/a.ts", ctx) == "src/types.d.ts"
    assert resolve_import("typescript", ImportFact("react", None, None, 1), "src/a.ts", ctx) is None

"""Definitions and references found by the query files, through parse_source.

Each fixture project under fixtures/<lang>_project has known definitions; the
expected sets below are exact so a pattern that starts over- or under-matching
shows up as a diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tree_sitter as ts

from memstrata.indexer.languages import get_language, language_for_path, query_source
from memstrata.indexer.parse import parse_source

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

QUERY_LANGUAGES = ["javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "csharp", "ruby", "php"]


@pytest.mark.parametrize("language", QUERY_LANGUAGES)
def test_query_compiles(language):
    query = ts.Query(get_language(language), query_source(language))
    names = {query.capture_name(i) for i in range(query.capture_count)}
    assert "name" in names and "import" in names


def _parse(language: str, rel: str):
    path = FIXTURES / f"{language}_project" / rel
    lang = language_for_path(rel)
    result = parse_source(rel, lang, path.read_bytes())
    assert result.syntax_error is None, (rel, result.syntax_error)
    return result


SYMBOLS = {
    'javascript': {
        'src/app.js': {
            ('start', 'function'),
        },
        'src/auth.js': {
            ('AuthService', 'class'),
            ('AuthService.login', 'method'),
            ('BaseService', 'class'),
            ('BaseService.constructor', 'method'),
            ('BaseService.find', 'method'),
            ('Session', 'class'),
            ('Session.constructor', 'method'),
            ('Session.expire', 'method'),
        },
        'src/hash.js': {
            ('SALT_ROUNDS', 'constant'),
            ('hashPassword', 'function'),
            ('verifyPassword', 'function'),
        },
        'src/middleware/index.js': {
            ('sessionMiddleware', 'function'),
        },
        'src/routes/login.js': {
            ('loginRoute', 'function'),
        },
        'src/store.js': {
            ('remove', 'function'),
            ('sessions', 'constant'),
        },
    },
    'typescript': {
        'src/auth.ts': {
            ('AuthService', 'class'),
            ('AuthService.load', 'method'),
            ('AuthService.login', 'method'),
            ('Authenticator', 'interface'),
            ('Authenticator.login', 'method'),
            ('BaseService', 'class'),
            ('BaseService.load', 'method'),
            ('Session', 'class'),
            ('Session.constructor', 'method'),
        },
        'src/hash.ts': {
            ('PEPPER', 'constant'),
            ('hash', 'function'),
        },
        'src/models.ts': {
            ('Role', 'enum'),
            ('User', 'interface'),
            ('UserId', 'type'),
        },
        'src/routes.tsx': {
            ('LoginButton', 'function'),
            ('render', 'function'),
            ('service', 'constant'),
        },
    },
    'go': {
        'auth/service.go': {
            ('Base', 'struct'),
            ('Base.Name', 'method'),
            ('NewService', 'function'),
            ('Service', 'struct'),
            ('Service.Login', 'method'),
            ('Store', 'interface'),
            ('Store.Digest', 'method'),
            ('newToken', 'function'),
        },
        'auth/service_test.go': {
            ('TestLogin', 'function'),
        },
        'auth/session.go': {
            ('Admin', 'constant'),
            ('Member', 'constant'),
            ('Role', 'type'),
            ('Session', 'struct'),
            ('Session.Valid', 'method'),
            ('Token', 'type'),
        },
        'cmd/server/main.go': {
            ('main', 'function'),
        },
        'hash/hash.go': {
            ('Cost', 'constant'),
            ('Hash', 'function'),
        },
    },
    'rust': {
        'src/auth/mod.rs': {
            ('Authenticator', 'interface'),
            ('Authenticator.login', 'method'),
            ('Authenticator.name', 'method'),
        },
        'src/auth/service.rs': {
            ('AuthService', 'struct'),
            ('AuthService.login', 'method'),
            ('AuthService.new', 'method'),
        },
        'src/auth/session.rs': {
            ('Role', 'enum'),
            ('Session', 'struct'),
            ('Session.new', 'method'),
            ('Token', 'type'),
        },
        'src/hash.rs': {
            ('PEPPER', 'constant'),
            ('ROUNDS', 'constant'),
            ('hash_password', 'function'),
        },
        'src/main.rs': {
            ('main', 'function'),
        },
    },
    'java': {
        'src/main/java/com/acme/auth/AuthService.java': {
            ('AuthService', 'class'),
            ('AuthService.AuthService', 'method'),
            ('AuthService.login', 'method'),
        },
        'src/main/java/com/acme/auth/Authenticator.java': {
            ('Authenticator', 'interface'),
            ('Authenticator.login', 'method'),
        },
        'src/main/java/com/acme/auth/BaseService.java': {
            ('BaseService', 'class'),
            ('BaseService.BaseService', 'method'),
            ('BaseService.digestOf', 'method'),
        },
        'src/main/java/com/acme/auth/Role.java': {
            ('Role', 'enum'),
            ('Role.ADMIN', 'constant'),
            ('Role.MEMBER', 'constant'),
            ('Role.isAdmin', 'method'),
        },
        'src/main/java/com/acme/auth/Session.java': {
            ('Session', 'class'),
        },
        'src/main/java/com/acme/util/Hash.java': {
            ('Hash', 'class'),
            ('Hash.Hash', 'method'),
            ('Hash.sha', 'method'),
        },
        'src/main/java/com/acme/web/LoginController.java': {
            ('LoginController', 'class'),
            ('LoginController.handle', 'method'),
        },
    },
    'c': {
        'src/auth.c': {
            ('MAX_ATTEMPTS', 'constant'),
            ('auth_login', 'function'),
            ('fill_session', 'function'),
        },
        'src/auth.h': {
            ('Session', 'struct'),
            ('role', 'enum'),
            ('user_store', 'struct'),
        },
        'src/hash.c': {
            ('hash_password', 'function'),
        },
        'src/hash.h': {
            ('HASH_LEN', 'constant'),
            ('hash_t', 'type'),
        },
        'src/main.c': {
            ('lookup', 'function'),
            ('main', 'function'),
        },
    },
    'cpp': {
        'include/auth/service.hpp': {
            ('AuthService', 'class'),
            ('AuthService.pepper', 'method'),
            ('Authenticator', 'class'),
            ('Authenticator.~Authenticator', 'method'),  # a destructor defined in its class
            ('kMaxAttempts', 'constant'),
        },
        'include/auth/session.hpp': {
            ('Role', 'enum'),
            ('Session', 'struct'),
            ('Session.valid', 'method'),
            ('Token', 'type'),
        },
        'src/main.cpp': {
            ('main', 'function'),
        },
        'src/service.cpp': {
            ('AuthService.AuthService', 'method'),
            ('AuthService.hash', 'method'),
            ('AuthService.login', 'method'),
        },
    },
    'csharp': {
        'src/Auth/AuthService.cs': {
            ('AuthService', 'class'),
            ('AuthService.AuthService', 'method'),
            ('AuthService.Login', 'method'),
            ('BaseService', 'class'),
            ('BaseService.BaseService', 'method'),
        },
        'src/Auth/IAuthenticator.cs': {
            ('IAuthenticator', 'interface'),
            ('IAuthenticator.Login', 'method'),
            ('Role', 'enum'),
            ('Role.Admin', 'constant'),
            ('Role.Member', 'constant'),
            ('Session', 'class'),
        },
        'src/Util/Hasher.cs': {
            ('Hasher', 'class'),
            ('Hasher.Hash', 'method'),
        },
        'src/Web/LoginController.cs': {
            ('LoginController', 'class'),
            ('LoginController.Handle', 'method'),
            ('LoginRequest', 'struct'),
        },
    },
    'ruby': {
        'app/routes.rb': {
            ('LoginRoute', 'class'),
            ('LoginRoute.call', 'method'),
        },
        'lib/auth/hashing.rb': {
            ('Auth', 'module'),
            ('Auth.Hashing', 'module'),
            ('Auth.Hashing.digest', 'method'),
        },
        'lib/auth/service.rb': {
            ('Auth', 'module'),
            ('Auth.BaseService', 'class'),
            ('Auth.BaseService.initialize', 'method'),
            ('Auth.Service', 'class'),
            ('Auth.Service.login', 'method'),
        },
        'lib/auth/session.rb': {
            ('Auth', 'module'),
            ('Auth.Session', 'class'),
            ('Auth.Session.TTL', 'constant'),
            ('Auth.Session.anonymous', 'method'),
            ('Auth.Session.initialize', 'method'),
        },
        'lib/auth.rb': {
            ('Auth', 'module'),
            ('Auth.VERSION', 'constant'),
        },
    },
    'php': {
        'public/index.php': set(),
        'src/Auth/AuthService.php': {
            ('AuthService', 'class'),
            ('AuthService.login', 'method'),
            ('BaseService', 'class'),
            ('Session', 'class'),
            ('Session.__construct', 'method'),
        },
        'src/Auth/Authenticator.php': {
            ('Authenticator', 'interface'),
            ('Authenticator.login', 'method'),
            ('Loggable', 'interface'),
            ('Loggable.log', 'method'),
            ('Role', 'enum'),
            ('Role.Admin', 'constant'),
            ('Role.Member', 'constant'),
        },
        'src/Models/User.php': {
            ('User', 'class'),
            ('User.__construct', 'method'),
        },
        'src/Util/Hash.php': {
            ('ALGORITHM', 'constant'),
            ('Hash', 'class'),
            ('Hash.make', 'method'),
        },
        'src/bootstrap.php': {
            ('service', 'function'),
        },
    },
}


def _cases():
    for language, files in SYMBOLS.items():
        for rel, expected in files.items():
            yield pytest.param(language, rel, expected, id=f"{language}:{rel}")


@pytest.mark.parametrize("language,rel,expected", list(_cases()))
def test_symbols_exact(language, rel, expected):
    result = _parse(language, rel)
    assert {(s.qualname, s.kind) for s in result.symbols} == expected


def test_every_fixture_file_is_covered():
    for language, files in SYMBOLS.items():
        root = FIXTURES / f"{language}_project"
        on_disk = {
            p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and language_for_path(p.name)
        }
        assert on_disk == set(files), language


# (name, kind, scope, receiver) that must be present
REFS = {
    ("javascript", "src/auth.js"): {
        ("BaseService", "inherit", "AuthService", None),
        ("Session", "call", "AuthService.login", None),
        ("check", "call", "AuthService.login", None),
        ("find", "call", "AuthService.login", "this"),
        ("remove", "call", "Session.expire", "store"),
    },
    ("javascript", "src/routes/login.js"): {
        ("AuthService", "call", "loginRoute", None),
        ("login", "call", "loginRoute", "service"),
    },
    ("typescript", "src/auth.ts"): {
        ("BaseService", "inherit", "AuthService", None),
        ("Authenticator", "inherit", "AuthService", None),
        ("User", "type", "AuthService.load", None),
        ("UserId", "type", "Authenticator.login", None),
        ("Session", "type", "AuthService.login", None),
        ("hash", "call", "AuthService.login", None),
        ("load", "call", "AuthService.login", "this"),
    },
    ("typescript", "src/routes.tsx"): {
        ("AuthService", "call", "service", None),
        ("login", "call", "LoginButton", "service"),
        ("Session", "type", "render", None),
    },
    ("go", "auth/service.go"): {
        ("Base", "inherit", "Service", None),
        ("Hash", "call", "Service.Login", "h"),
        ("Digest", "call", "Service.Login", "s.store"),
        ("newToken", "call", "Service.Login", None),
        ("Session", "call", "Service.Login", None),
        ("Session", "type", "Service.Login", None),
        ("Store", "type", "NewService", None),
    },
    ("go", "cmd/server/main.go"): {
        ("NewService", "call", "main", "auth"),
        ("Login", "call", "main", "svc"),
    },
    ("rust", "src/auth/service.rs"): {
        ("hash_password", "call", "AuthService.login", None),
        ("new", "call", "AuthService.login", "Session"),
        ("Session", "type", "AuthService.login", None),
        ("AuthService", "call", "AuthService.new", None),
        ("get", "call", "AuthService.login", "self.digests"),
    },
    ("rust", "src/main.rs"): {
        ("new", "call", "main", "AuthService"),
        ("login", "call", "main", "service"),
    },
    ("java", "src/main/java/com/acme/auth/AuthService.java"): {
        ("BaseService", "inherit", "AuthService", None),
        ("Authenticator", "inherit", "AuthService", None),
        ("sha", "call", "AuthService.login", None),
        ("digestOf", "call", "AuthService.login", None),
        ("Session", "call", "AuthService.login", None),
        ("Session", "type", "AuthService.login", None),
    },
    ("java", "src/main/java/com/acme/web/LoginController.java"): {
        ("AuthService", "call", "LoginController", None),
        ("login", "call", "LoginController.handle", "service"),
        ("sha", "call", "LoginController.handle", "Hash"),
    },
    ("c", "src/auth.c"): {
        ("hash_password", "call", "auth_login", None),
        ("fill_session", "call", "auth_login", None),
        ("lookup", "call", "auth_login", "store"),
        ("Session", "type", "fill_session", None),
        ("user_store", "type", "auth_login", None),
    },
    ("cpp", "src/service.cpp"): {
        ("hash", "call", "AuthService.login", None),
        ("Session", "type", "AuthService.login", None),
        ("to_string", "call", "AuthService.hash", "std"),
    },
    ("cpp", "include/auth/service.hpp"): {
        ("Authenticator", "inherit", "AuthService", None),
        ("Session", "type", "Authenticator", None),
    },
    ("cpp", "src/main.cpp"): {
        ("AuthService", "call", "main", "auth"),
        ("login", "call", "main", "service"),
        ("Session", "type", "main", "auth"),
    },
    ("csharp", "src/Auth/AuthService.cs"): {
        ("BaseService", "inherit", "AuthService", None),
        ("IAuthenticator", "inherit", "AuthService", None),
        ("Hash", "call", "AuthService.Login", "Hasher"),
        ("Session", "call", "AuthService.Login", None),
    },
    ("csharp", "src/Web/LoginController.cs"): {
        ("AuthService", "call", "LoginController", None),
        ("Login", "call", "LoginController.Handle", "_auth"),
        ("LoginRequest", "type", "LoginController.Handle", None),
    },
    ("ruby", "lib/auth/service.rb"): {
        ("BaseService", "inherit", "Auth.Service", None),
        ("Hashing", "inherit", "Auth.Service", None),
        ("Session", "call", "Auth.Service.login", None),
        ("digest", "call", "Auth.Service.login", None),
        ("fetch", "call", "Auth.Service.login", "@store"),
    },
    ("ruby", "app/routes.rb"): {
        ("Service", "call", "LoginRoute.call", "Auth"),
        ("login", "call", "LoginRoute.call", "service"),
    },
    ("php", "src/Auth/AuthService.php"): {
        ("BaseService", "inherit", "AuthService", None),
        ("Authenticator", "inherit", "AuthService", None),
        ("Loggable", "inherit", "AuthService", None),
        ("make", "call", "AuthService.login", "Hash"),
        ("log", "call", "AuthService.login", "$this"),
        ("Session", "call", "AuthService.login", None),
        ("User", "type", "AuthService.login", None),
    },
    ("php", "src/bootstrap.php"): {
        ("AuthService", "call", "service", None),
    },
}


@pytest.mark.parametrize("language,rel", list(REFS), ids=[f"{lang}:{rel}" for lang, rel in REFS])
def test_refs_present(language, rel):
    result = _parse(language, rel)
    found = {(r.name, r.kind, r.scope, r.receiver) for r in result.refs}
    missing = REFS[(language, rel)] - found
    assert not missing, sorted(found)


NOT_REFS = {
    # builtins and require() are not references worth recording
    ("go", "auth/service.go"): {("string", "type"), ("error", "type")},
    ("javascript", "src/routes/login.js"): {("require", "call")},
    ("rust", "src/auth/session.rs"): {("Self", "type")},
    ("java", "src/main/java/com/acme/auth/AuthService.java"): {("var", "type")},
    ("ruby", "lib/auth/service.rb"): {("require", "call"), ("include", "call"), ("new", "call")},
    ("php", "src/Util/Hash.php"): {("static", "call")},
}


@pytest.mark.parametrize("language,rel", list(NOT_REFS), ids=[f"{lang}:{rel}" for lang, rel in NOT_REFS])
def test_refs_absent(language, rel):
    result = _parse(language, rel)
    found = {(r.name, r.kind) for r in result.refs}
    assert not (NOT_REFS[(language, rel)] & found)


def test_js_require_binding_is_not_a_constant():
    source = b"const store = require('./store');\nconst sessions = new Map();\nconst cfg = load();\n"
    result = parse_source("x.js", "javascript", source)
    assert {(s.qualname, s.kind) for s in result.symbols} == {("sessions", "constant"), ("cfg", "constant")}


def test_python_implicit_type_aliases_are_types():
    source = (b'from typing import Literal, Union, NewType\nimport typing\n'
              b'JustifyMethod = Literal["left", "right"]\nRenderableType = Union[str, "Text"]\n'
              b'Number = int | float\nUserId = typing.NewType("UserId", int)\n'
              b'MAX_SIZE = 10\nfirst = things[0]\nConfig = load()\n'
              b'def f():\n    Local = Union[int, str]\n')
    result = parse_source("m.py", "python", source)
    assert {(s.qualname, s.kind) for s in result.symbols} == {
        ("JustifyMethod", "type"), ("RenderableType", "type"), ("Number", "type"), ("UserId", "type"),
        ("MAX_SIZE", "constant"), ("f", "function")}


def test_a_go_package_variable_holding_a_function_literal_is_a_function():
    """`var mergeFn = func(..) { .. }` is a function callers call by that name (a replaceable
    hook); a variable of another value, a local one or one of several names is not."""
    source = (b"package x\n\nvar mergeFn = func(a, b []int) []int {\n\treturn helper(a)\n}\n\n"
              b"var (\n\tonClose = func() {}\n\tlimit = 3\n\tx, y = func() {}, 2\n)\n\n"
              b"func helper(a []int) []int {\n\tlocal := func() {}\n\tlocal()\n\treturn a\n}\n")
    result = parse_source("x.go", "go", source)
    assert _definitions(result) == {
        ("mergeFn", "function", 3, 5, "mergeFn = func(a, b []int) []int"),
        ("onClose", "function", 8, 8, "onClose = func()"),
        ("helper", "function", 13, 17, "func helper(a []int) []int")}
    assert ("helper", "mergeFn") in {(r.name, r.scope) for r in result.refs if r.kind == "call"}


def test_a_rust_macro_rules_definition_is_a_function():
    """`macro_rules! name` is what `name!(..)` expands to: found by its name, shown whole."""
    source = (b"/// Reads a big-endian value.\nmacro_rules! buf_get_impl {\n    ($t:ident) => {{ 1 }};\n}\n\n"
              b"mod inner {\n    macro_rules! local( () => {} );\n}\n\npub fn get() -> u32 {\n"
              b"    buf_get_impl!(u32)\n}\n")
    assert _definitions(parse_source("lib.rs", "rust", source)) == {
        ("buf_get_impl", "function", 2, 4, "macro_rules! buf_get_impl"),
        ("inner", "module", 6, 8, "mod inner"),
        ("inner.local", "function", 7, 7, "macro_rules! local"),
        ("get", "function", 10, 12, "pub fn get() -> u32")}


def _definitions(result) -> set[tuple]:
    return {(s.qualname, s.kind, s.start_line, s.end_line, s.signature) for s in result.symbols}


def test_ts_query_also_covers_tsx_jsx_components():
    source = b"export const View = () => <div/>;\nexport function Page(): JSX.Element { return <View/>; }\n"
    result = parse_source("x.tsx", "tsx", source)
    assert {(s.qualname, s.kind) for s in result.symbols} == {("View", "function"), ("Page", "function")}


def test_typescript_export_type_star_is_a_re_export_not_a_syntax_error():
    """TypeScript 5.0's `export type * from` re-exports a module's types; the bundled grammar
    has no rule for it.  Read as the re-export it is, the file has no syntax error and every
    offset is the file's own (the text in a string is left alone)."""
    source = (b"export type * from './types'\n  export type * as Api from './api'\n"
              b"export function f() {}\nconst s = 'export type * from'\n")
    result = parse_source("index.ts", "typescript", source)
    assert result.syntax_error is None
    assert [(i.module, i.name, i.alias, i.line) for i in result.imports] == [
        ("./types", "*", None, 1), ("./api", None, "Api", 2)]
    assert {(s.qualname, s.start_line) for s in result.symbols} == {("f", 3), ("s", 4)}
    assert parse_source("x.ts", "typescript", b"export type * from\n").syntax_error is not None


def test_c_include_guard_is_not_a_constant():
    result = _parse("c", "src/hash.h")
    assert "HASH_H" not in {s.name for s in result.symbols}


def test_cpp_out_of_class_method_uses_receiver():
    source = b"namespace app { void Foo::bar() {} int Box<int>::get() { return 0; } }\nvoid free_fn() {}\n"
    result = parse_source("x.cpp", "cpp", source)
    assert {(s.qualname, s.kind) for s in result.symbols} == {
        ("Foo.bar", "method"),
        ("Box.get", "method"),
        ("free_fn", "function"),
    }

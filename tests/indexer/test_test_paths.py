"""Which files are test code: the ranking passes them over unless a question is about tests,
and the proxy does not keep their functions by rank."""

from __future__ import annotations

import pytest

from memstrata.indexer.scan import is_test_path


@pytest.mark.parametrize("path", [
    "tests/test_core.py", "src/pkg/core_test.go", "lib/router.spec.ts", "__tests__/a.js", "conftest.py",
    # scaffolding only the tests use, in its own directory or as one file beside the code
    "internal/testutil/filepath.go", "src/test_helpers/mod.rs", "test-helpers/context.js",
    "packages/x/src/test-utils.ts", "src/testUtils.ts", "pkg/testutils/fixtures.go", "testhelpers.go",
    "src/main/java/x/TestUtils.java", "lib/TestHelper.kt", "internal/test_util/db.go",
    # what JavaScript test runners read beside the code, and a monorepo's package of scaffolding
    "packages/store/src/__mocks__/useStore.ts", "src/v5/rename/__testfixtures__/default.input.tsx",
    "lib/__fixtures__/tree.js", "packages/shop-test-utils/src/index.ts", "crates/net_testutils/src/lib.rs",
    # TypeScript type tests beside the declarations they check
    "index.test-d.ts", "src/types/options.spec-d.ts", "packages/x/src/api.test-d.tsx",
    # a module of unit tests the source file beside it declares (`#[cfg(test)] mod dispatcher_tests;`)
    "crates/http/src/h1/dispatcher_tests.rs", "src/parser_tests.py",
])
def test_test_code_and_its_scaffolding_are_test_paths(path):
    assert is_test_path(path)


@pytest.mark.parametrize("path", [
    "src/click/testing.py",  # a library's own testing API is what its users call
    "src/utils.ts", "src/contest.py", "lib/attest.rs", "pkg/latest/util.go", "src/testimony/render.py",
    "packages/latest-utils/src/index.ts", "src/mocks/http.ts",  # a suffix that only looks alike; a mock the app ships
    "src/contest-d.ts", "types/index.d.ts",  # declarations are the product's, not its type tests
    "src/contests.rs", "lib/latests.py",  # a plural that only ends in the letters
])
def test_production_code_is_not(path):
    assert not is_test_path(path)

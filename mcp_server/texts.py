"""What an agent reads about MemStrata: server instructions and tool descriptions.

Written for the model on the other end: when to call which tool, what each
field means, and what to do when a call fails.
"""

SERVER_NAME = "memstrata"

INSTRUCTIONS = """\
MemStrata has indexed the source code of this project (definitions, references, \
calls, imports) and keeps the index fresh while files change.

- context_query: call it before you read or change code you have not seen yet in \
this conversation. Pass a symbol name ("AuthService.login") or a question \
("how are sessions validated, and who calls it"). It returns the matching \
definitions together with their callers and dependencies, cut to fit max_tokens, \
and is usually much smaller than the files it draws from. Prefer it to opening \
whole files; open a file yourself only for text the slice left out. Pass \
include_tests=true when you need the project's tests.
- find_symbol: when you know the name of what you need ("AuthService.login", \
"parse_config", "Router*"), call it with include_body=true instead of reading the \
whole file: it returns the definition's exact source and line range.
- find_references: before you change or rename a function, class or method, call \
it to list every place that uses it (calls, type uses, subclasses, imports).
- file_outline: call it to see what a file defines (nested, with line ranges) \
before deciding what to read.
- index_status: call it when a slice looks out of date or empty, or after large \
changes such as a branch switch. status "indexing" means wait a moment and retry; \
"stale" means files changed since the last index run; "error" means the index \
must be rebuilt with `memstrata index`.
- savings_summary: call it only when the user asks how many tokens or dollars \
MemStrata has saved.
"""

CONTEXT_QUERY = """\
Return a compressed, dependency-aware slice of this project's code for a question \
or a symbol name: the definitions that match, plus the code that calls them and \
that they depend on, ranked through the project's code graph and cut to fit \
max_tokens. Use it instead of opening whole files when you need to understand or \
change code.

Result fields:
- context: the slice, grouped by file, each file introduced by its project-relative path.
- tokens: token count of `context` (cl100k_base), never more than max_tokens.
- baseline_tokens: the tokens of the complete text of every file in `sources` — \
what a file-level RAG would have sent to give the model the same sources.
- sources: project-relative paths of the files the slice draws from, most relevant first.

When nothing in the project matches the question, `context` is an overview (the \
definitions the project uses most) and a note after the result says so: rephrase \
with the names of functions, classes or files for a focused slice. An empty \
`context` means the project has no code indexed."""

QUERY_ARG = "Natural-language question or symbol name, e.g. 'AuthService.login and its callers'."
MAX_TOKENS_ARG = "Token budget for `context` (cl100k_base). Default 4096."
INCLUDE_TESTS_ARG = "Also draw from test files. Default false."

INDEX_STATUS = """\
Report the state of this project's code index.

Result fields:
- project: absolute path of the indexed project.
- files_indexed: number of files in the index.
- last_indexed: when the index last took in the project's changes: the end of the last index run, or the last file change a watcher applied (ISO 8601, UTC); null if no index run has finished yet.
- index_size_mb: size of the index database on disk, in MiB.
- status: "ready" (up to date), "indexing" (an update is running: retry shortly), \
"stale" (files changed since the last index run, or the last run was interrupted), \
or "error" (the last index run failed: rebuild with `memstrata index`)."""

SAVINGS_SUMMARY = """\
Report the input tokens and dollars the MemStrata proxy has saved on this project \
by sending compressed context instead of whole files. Call it only when the user \
asks about savings.

Result fields (null means there is no data for that figure yet):
- session_tokens_saved: input tokens saved in the current session: the `memstrata serve` \
process(es) running on this project now (0 when none runs).
- session_dollar_saved: USD saved in that session: what the provider would have \
billed for the requests' prompts as the client sent them minus what it billed for \
the forwarded ones, at the cache-aware rates of ~/memstrata/providers.json (can be negative).
- cycle_tokens_saved: input tokens saved in the current billing month (UTC, from \
the billing_cycle_start_day in providers.json).
- cycle_dollar_saved: the same dollars over the billing month.
- provider_rate_per_token: USD per input token of the model most of the savings came from.
- recall: of the code symbols the model's answers used, the share the slices contained (0-1).
- precision: of the code symbols in the slices, the share the model's answers used (0-1)."""

FIND_SYMBOL = """\
Find definitions by name and, with include_body=true, return their exact source. \
Use it instead of reading a whole file when you know the symbol you need.

`name` is a plain name ("login"), a qualified name ("AuthService.login", \
"pkg.mod.func", "a::b::C", "Vendor\\\\Pkg\\\\Class::method"), a project id ("app/auth/service.py::AuthService.login"), \
or a substring search when it ends with "*" ("Auth*"). `kind` keeps one kind of \
definition (function, method, class, interface, struct, enum, type, constant, module); \
`path` keeps those in one file or folder.

Result fields:
- symbols: the matches, exact ones first, then the most used. Each has symbol (its \
project id, usable in find_references), kind, path (project-relative), start_line and \
end_line (1-based, inclusive), signature, and with include_body the source text of \
start_line..end_line exactly as in the file.
- truncated: true when more matched than max_results.

Ranges are never stale: a file edited since it was indexed is read again."""

FIND_REFERENCES = """\
List where a symbol is used: calls, type uses, subclasses and imports, across files \
wherever the import resolves. Call it before changing or renaming a definition.

`symbol` is written as for find_symbol; a name that designates several definitions \
answers an error listing them: pass the one you mean (its project id from \
find_symbol is exact).

Result fields:
- symbol: the project id of the definition whose uses are listed.
- references: in file and line order (when there are more than max_results, those \
listed are production code before tests, the files nearest the definition first: its \
own, then its package's); each has path, line (1-based), symbol (the \
project id of the enclosing definition, null at module level), kind (call, type, \
import, inherit or other) and snippet (that source line, stripped).
- truncated: true when there are more uses than max_results.
- unattributed: how many uses of the same name the index attributed to no definition \
(a method called on a receiver of unknown type whose name several classes define, or on a \
type the project does not define, like PathBuf::from, or that no project code defines, like a \
dict's get): they are not listed; when it is not 0, \
search the code for the name to find any that are this definition's."""

FILE_OUTLINE = """\
Outline a file: its definitions in source order, nested (methods inside their \
class), each with symbol (project id), kind, start_line, end_line and signature. \
Use it to decide what to read; then fetch a body with find_symbol.

Result fields: path (project-relative), language, symbols (each with children, down \
to `depth` levels)."""

NAME_ARG = "Symbol name: 'login', 'AuthService.login', 'app/auth/service.py::AuthService.login', or 'Auth*'."
SYMBOL_ARG = "The symbol whose uses to list, written as for find_symbol's name."
INCLUDE_BODY_ARG = "Also return each definition's source text. Default false."
KIND_ARG = "Only definitions of this kind (function, method, class, interface, struct, enum, type, constant, module)."
PATH_ARG = "Only definitions in this project-relative file or folder."
MAX_RESULTS_ARG = "Most results to return, 1-200 (values outside are clamped)."
OUTLINE_PATH_ARG = "Project-relative path of an indexed file, e.g. 'src/app.py'."
DEPTH_ARG = "Nesting levels to show: 1 = top-level definitions only. Default 2."

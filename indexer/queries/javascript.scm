; MemStrata definitions, references and imports for JavaScript (.js .mjs .cjs .jsx).
; Captures follow the contract in indexer/parse.py: @definition.<kind> + @name,
; @reference.<kind> + @name (+ @receiver), @import.  Captures named @_x only
; feed predicates.

; ---- definitions -------------------------------------------------------

(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (identifier) @name) @definition.class
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.method

; class fields holding a function behave like methods
(field_definition
  property: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression)]) @definition.method

; definitions by assignment: `res.send = function send() {}`, `Foo.prototype.bar = ...`,
; `exports.x = ...`, `module.exports = function name() {}` / `= class Name {}`
; (parse.py turns the receiver into the qualified name)
(assignment_expression
  left: (member_expression
    object: [(identifier) (member_expression) (this)] @receiver
    property: (property_identifier) @name)
  right: [(function_expression) (arrow_function) (generator_function)]) @definition.function
(assignment_expression
  left: (member_expression
    object: [(identifier) (member_expression)] @receiver
    property: (property_identifier) @name)
  right: (class)) @definition.class
; `Foo.prototype = { bar() {}, baz: function () {} }`: the members are Foo's
((assignment_expression
  left: (member_expression object: (identifier) @name property: (property_identifier) @_proto)
  right: (object)) @scope
  (#eq? @_proto "prototype"))

; object-literal members holding a function: `{ send: function () {}, close: () => {} }`
(pair
  key: (property_identifier) @name
  value: [(function_expression) (arrow_function) (generator_function)]) @definition.method

; top-level `const f = () => {}` / `let f = function () {}` (plain or exported)
(program
  [(lexical_declaration
     (variable_declarator
       name: (identifier) @name
       value: [(arrow_function) (function_expression) (generator_function)]) @definition.function)
   (variable_declaration
     (variable_declarator
       name: (identifier) @name
       value: [(arrow_function) (function_expression) (generator_function)]) @definition.function)])
(program
  (export_statement
    declaration: (lexical_declaration
      (variable_declarator
        name: (identifier) @name
        value: [(arrow_function) (function_expression) (generator_function)]) @definition.function)))

; `export default function () {}`, `export default () => {}`, `export default class {}`: an
; anonymous default is named after its file, as `module.exports = function () {}` is (parse.py)
(program (export_statement "default" @name
  value: [(function_expression) (arrow_function) (generator_function)] @definition.function))
(program (export_statement "default" @name value: (class) @definition.class))

; top-level `const X = <non-function value>`
(program
  (lexical_declaration
    "const"
    (variable_declarator
      name: (identifier) @name
      value: [(number) (string) (template_string) (object) (array)
              (new_expression) (identifier) (member_expression) (true) (false) (null)
              (undefined) (binary_expression) (unary_expression) (regex)
              (ternary_expression) (await_expression)]) @definition.constant))
(program
  (export_statement
    declaration: (lexical_declaration
      "const"
      (variable_declarator
        name: (identifier) @name
        value: [(number) (string) (template_string) (object) (array)
                (new_expression) (identifier) (member_expression) (true) (false) (null)
                (undefined) (binary_expression) (unary_expression) (regex)
                (ternary_expression) (await_expression)]) @definition.constant)))

; ... and `const X = f(...)`, except `require(...)`, which is an import
(program
  (lexical_declaration
    "const"
    (variable_declarator
      name: (identifier) @name
      value: (call_expression function: (_) @_callee)) @definition.constant)
  (#not-eq? @_callee "require"))
(program
  (export_statement
    declaration: (lexical_declaration
      "const"
      (variable_declarator
        name: (identifier) @name
        value: (call_expression function: (_) @_callee)) @definition.constant))
  (#not-eq? @_callee "require"))

; ---- references ----------------------------------------------------------

((call_expression function: (identifier) @name) @reference.call
  (#not-match? @name "^(require)$"))
(call_expression
  function: (member_expression
    object: (_) @receiver
    property: [(property_identifier) (private_property_identifier)] @name)) @reference.call
(new_expression constructor: (identifier) @name) @reference.call
(new_expression
  constructor: (member_expression object: (_) @receiver property: (property_identifier) @name)) @reference.call

(class_heritage (identifier) @name) @reference.inherit
(class_heritage
  (member_expression object: (_) @receiver property: (property_identifier) @name)) @reference.inherit

; ---- declared types: a `bind` row says which class a variable is constructed from
; (`const s = new Store()`), for the calls made on it; it makes no edge.
(variable_declarator name: (identifier) @receiver
  value: (new_expression constructor: (identifier) @name)) @reference.bind
; ... or from a class reached through a name (`new ns.Store()` after `import * as ns`,
; `new Intl.NumberFormat()`): the row's type is the dotted path
(variable_declarator name: (identifier) @receiver
  value: (new_expression
    constructor: (member_expression object: [(identifier) (member_expression)]
                                    property: (property_identifier)) @name)) @reference.bind

; `export default toRem`: the module's `default` is bound to the name, which the graph
; follows to its definition (the module's own, or one it imported)
(program (export_statement "default" @receiver value: (identifier) @name) @reference.bind)
; ... and the export is a use of the name (the module refers to its definition), as is
; `export { toRem, b as c }` of names the module has (no `from`: that is an import)
(program (export_statement "default" value: (identifier) @name) @reference.export)
(program (export_statement !source (export_clause (export_specifier name: (identifier) @name))) @reference.export)

; ---- imports ---------------------------------------------------------------

(import_statement) @import
(export_statement source: (string)) @import
((call_expression
   function: (identifier) @_require
   arguments: (arguments . (string) .)) @import
  (#eq? @_require "require"))
(call_expression
  function: (import)
  arguments: (arguments . (string))) @import

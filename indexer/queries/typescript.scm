; MemStrata definitions, references and imports for TypeScript; also used for
; TSX, so every pattern must compile against both grammars.
; Captures named @_x only feed predicates.

; ---- definitions -------------------------------------------------------

(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (type_identifier) @name) @definition.class
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(interface_declaration name: (type_identifier) @name) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum

(method_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.method
(abstract_method_signature name: (property_identifier) @name) @definition.method
(interface_body
  (method_signature name: (property_identifier) @name) @definition.method)

; declarations without a body: `declare function f(): T;`, a `.d.ts` file's `export function f();`
; and `declare class C { get(k: string): V }` members, an overload's signatures (parse.py folds
; those into the implementation that follows them)
(function_signature name: (identifier) @name) @definition.function
(class_body
  (method_signature name: (property_identifier) @name) @definition.method)
; `declare const VERSION: string`, `declare let`/`var`; and a `const` with a type and no value,
; which only an ambient context allows (a `.d.ts` file, a `declare module` / `namespace` block)
(ambient_declaration
  [(lexical_declaration (variable_declarator name: (identifier) @name) @definition.constant)
   (variable_declaration (variable_declarator name: (identifier) @name) @definition.constant)])
(lexical_declaration
  "const"
  (variable_declarator name: (identifier) @name type: (type_annotation) !value) @definition.constant)

; `namespace Geometry {}`, `module Legacy {}`, `declare module 'lib' {}`: what they hold is named
; under them (`Geometry.area`, `lib.createClient`); `namespace A.B {}` is `B` inside `A`.
; (`declare global {}` is no module: what it declares is global, named at the top level.)
([(internal_module name: (identifier) @name)
  (module name: [(identifier) @name (string (string_fragment) @name)])]) @definition.module
([(internal_module name: (nested_identifier . (_) @receiver (property_identifier) @name .))
  (module name: (nested_identifier . (_) @receiver (property_identifier) @name .))]) @definition.module

(public_field_definition
  name: [(property_identifier) (private_property_identifier)] @name
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
              (ternary_expression) (await_expression) (as_expression)
              (satisfies_expression)]) @definition.constant))
(program
  (export_statement
    declaration: (lexical_declaration
      "const"
      (variable_declarator
        name: (identifier) @name
        value: [(number) (string) (template_string) (object) (array)
                (new_expression) (identifier) (member_expression) (true) (false) (null)
                (undefined) (binary_expression) (unary_expression) (regex)
                (ternary_expression) (await_expression) (as_expression)
                (satisfies_expression)]) @definition.constant)))

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

(extends_clause value: (identifier) @name) @reference.inherit
(extends_clause
  value: (member_expression object: (_) @receiver property: (property_identifier) @name)) @reference.inherit
(implements_clause (type_identifier) @name) @reference.inherit
(implements_clause (generic_type name: (type_identifier) @name)) @reference.inherit
(extends_type_clause type: (type_identifier) @name) @reference.inherit
(extends_type_clause type: (generic_type name: (type_identifier) @name)) @reference.inherit

(type_annotation (type_identifier) @name) @reference.type
(type_annotation (generic_type name: (type_identifier) @name)) @reference.type
(type_annotation (array_type (type_identifier) @name)) @reference.type
(type_annotation
  (nested_type_identifier module: (_) @receiver name: (type_identifier) @name)) @reference.type
(type_annotation
  (generic_type name: (nested_type_identifier module: (_) @receiver name: (type_identifier) @name))) @reference.type
(type_arguments (type_identifier) @name) @reference.type
(union_type (type_identifier) @name) @reference.type
(intersection_type (type_identifier) @name) @reference.type
(type_alias_declaration value: (type_identifier) @name) @reference.type
(type_alias_declaration value: (generic_type name: (type_identifier) @name)) @reference.type

; ---- declared types: `bind` rows say which type a variable, parameter or field is declared
; with, for the calls made on it (`writer.value()` with `JsonWriter writer`); they make no edge.
([(required_parameter pattern: (identifier) @receiver
    type: (type_annotation [(type_identifier) @name (generic_type name: (type_identifier) @name)]))
  (optional_parameter pattern: (identifier) @receiver
    type: (type_annotation [(type_identifier) @name (generic_type name: (type_identifier) @name)]))
  (variable_declarator name: (identifier) @receiver
    type: (type_annotation [(type_identifier) @name (generic_type name: (type_identifier) @name)]))
  (public_field_definition name: (property_identifier) @receiver
    type: (type_annotation [(type_identifier) @name (generic_type name: (type_identifier) @name)]))]) @reference.bind
; ... or with a type reached through a name (`const v: ns.Store = ...` after `import * as ns`,
; `ns.Store<T>`): the row's type is the dotted path, as for `new ns.Store()` below
([(required_parameter pattern: (identifier) @receiver
    type: (type_annotation [(nested_type_identifier) @name (generic_type name: (nested_type_identifier) @name)]))
  (optional_parameter pattern: (identifier) @receiver
    type: (type_annotation [(nested_type_identifier) @name (generic_type name: (nested_type_identifier) @name)]))
  (variable_declarator name: (identifier) @receiver
    type: (type_annotation [(nested_type_identifier) @name (generic_type name: (nested_type_identifier) @name)]))
  (public_field_definition name: (property_identifier) @receiver
    type: (type_annotation [(nested_type_identifier) @name (generic_type name: (nested_type_identifier) @name)]))]) @reference.bind
; ... or, unannotated, with the class it is constructed from: `const s = new Store()`
(variable_declarator name: (identifier) @receiver !type
  value: (new_expression constructor: (identifier) @name)) @reference.bind
; ... or from a class reached through a name (`new ns.Store()` after `import * as ns`,
; `new Intl.NumberFormat()`): the row's type is the dotted path
(variable_declarator name: (identifier) @receiver !type
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

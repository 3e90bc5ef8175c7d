; MemStrata query for Python: definitions, references, imports.
; Capture contract: see indexer/parse.py.

(class_definition
  name: (identifier) @name) @definition.class

(function_definition
  name: (identifier) @name) @definition.function

; Module-level constants: UPPER_CASE = ... at the top of a module.
(module
  (expression_statement
    (assignment
      left: (identifier) @name) @definition.constant)
  (#match? @name "^_?[A-Z][A-Z0-9_]*$"))

; Type aliases: `Alias: TypeAlias = ...` and `type Alias = ...`.
(module
  (expression_statement
    (assignment
      left: (identifier) @name
      type: (type (identifier) @_ta)) @definition.type)
  (#eq? @_ta "TypeAlias"))

(type_alias_statement
  left: (type (identifier) @name)) @definition.type

; Implicit type aliases (PEP 484): a module-level CamelCase name bound to a
; generic type (`JustifyMethod = Literal["left", "right"]`, `Renderable =
; Union[str, Text]`), a union of types (`Number = int | float`), or a
; TypeVar / NewType / ParamSpec.  UPPER_CASE names are constants (above).
(module
  (expression_statement
    (assignment
      left: (identifier) @name
      right: [(subscript value: [(identifier) (attribute)])
              (binary_operator operator: "|")]) @definition.type)
  (#match? @name "^_?[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*$"))

(module
  (expression_statement
    (assignment
      left: (identifier) @name
      right: (call function: [(identifier) @_f (attribute attribute: (identifier) @_f)])) @definition.type)
  (#match? @_f "^(TypeVar|NewType|ParamSpec|TypeVarTuple|TypeAliasType)$"))

; References capture their role on the name itself (no separate @name): a
; use needs nothing of the enclosing node, and every capture a match carries
; is an object built per match -- calls are most of a file's matches.

; Calls: f(), obj.method(), pkg.mod.f()
(call
  function: (identifier) @reference.call)

(call
  function: (attribute
    object: (_) @receiver
    attribute: (identifier) @reference.call))

; Base classes
(class_definition
  superclasses: (argument_list
    [(identifier) @reference.inherit
     (attribute attribute: (identifier) @reference.inherit)]))

; Type uses in annotations
(type (identifier) @reference.type)
(type (attribute attribute: (identifier) @reference.type))
(type (generic_type (identifier) @reference.type))
(type (subscript value: (identifier) @reference.type))

; Declared types: `bind` rows say which type a parameter or variable is annotated with, for
; the calls made on it (`request.send()` with `request: Request`); they make no edge.
(typed_parameter (identifier) @receiver
  type: (type [(identifier) @name (generic_type (identifier) @name)])) @reference.bind
(typed_default_parameter name: (identifier) @receiver
  type: (type [(identifier) @name (generic_type (identifier) @name)])) @reference.bind
(assignment left: (identifier) @receiver
  type: (type [(identifier) @name (generic_type (identifier) @name)])) @reference.bind
(assignment left: (attribute object: (identifier) @_self attribute: (identifier) @receiver)
  type: (type [(identifier) @name (generic_type (identifier) @name)])
  (#eq? @_self "self")) @reference.bind

; Imports
(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import

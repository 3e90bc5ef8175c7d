; MemStrata definitions, references and imports for C#.
; Namespaces are not symbols; records are classes, delegates are types.

; ---- definitions -------------------------------------------------------

(class_declaration name: (identifier) @name) @definition.class
(record_declaration name: (identifier) @name) @definition.class
(struct_declaration name: (identifier) @name) @definition.struct
(interface_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(delegate_declaration name: (identifier) @name) @definition.type
(method_declaration name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.method
; operators and conversions, named `operator+`, `operator int` (indexer/parse.py names them)
(operator_declaration) @definition.method @name
(conversion_operator_declaration) @definition.method @name
(indexer_declaration) @definition.method @name
; A property is its accessors, methods by another spelling.
(property_declaration name: (identifier) @name) @definition.method
; Constants: const fields and enum members.
((field_declaration (modifier) @_const (variable_declaration (variable_declarator name: (identifier) @name))) @definition.constant
  (#eq? @_const "const"))
(enum_member_declaration name: (identifier) @name) @definition.constant

; ---- references ----------------------------------------------------------

(invocation_expression
  function: [(identifier) @name (generic_name (identifier) @name)]) @reference.call
(invocation_expression
  function: (member_access_expression
    expression: (_) @receiver
    name: [(identifier) @name (generic_name (identifier) @name)])) @reference.call
(object_creation_expression
  type: [(identifier) @name
         (generic_name (identifier) @name)
         (qualified_name name: [(identifier) @name (generic_name (identifier) @name)])]) @reference.call

(base_list
  [(identifier) @name
   (generic_name (identifier) @name)
   (qualified_name name: [(identifier) @name (generic_name (identifier) @name)])]) @reference.inherit

[(parameter type: [(identifier) @name (generic_name (identifier) @name) (nullable_type (identifier) @name)])
 (variable_declaration type: [(identifier) @name (generic_name (identifier) @name) (nullable_type (identifier) @name)])
 (method_declaration returns: [(identifier) @name (generic_name (identifier) @name) (nullable_type (identifier) @name)])
 (property_declaration type: [(identifier) @name (generic_name (identifier) @name) (nullable_type (identifier) @name)])] @reference.type
(type_argument_list (identifier) @name) @reference.type
; An attribute (`[Option(...)]`, whose class is `OptionAttribute`: see indexer/graph.py) and
; `typeof(Parser)` use their type.
(attribute name: [(identifier) @name (qualified_name name: (identifier) @name)]) @reference.type
(typeof_expression type: [(identifier) @name (generic_name (identifier) @name)]) @reference.type

; ---- declared types: `bind` rows say which type a variable, parameter or field is declared
; with, for the calls made on it (`writer.value()` with `JsonWriter writer`); they make no edge.
(parameter
  type: [(identifier) @name (generic_name (identifier) @name) (nullable_type (identifier) @name)]
  name: (identifier) @receiver) @reference.bind
(variable_declaration
  type: [(identifier) @name (generic_name (identifier) @name) (nullable_type (identifier) @name)]
  (variable_declarator name: (identifier) @receiver)) @reference.bind
(property_declaration
  type: [(identifier) @name (generic_name (identifier) @name) (nullable_type (identifier) @name)]
  name: (identifier) @receiver) @reference.bind

; ---- imports ---------------------------------------------------------------

(using_directive) @import

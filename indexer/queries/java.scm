; MemStrata definitions, references and imports for Java.

; ---- definitions -------------------------------------------------------

(class_declaration name: (identifier) @name) @definition.class
(record_declaration name: (identifier) @name) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(annotation_type_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(method_declaration name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.method
(annotation_type_element_declaration name: (identifier) @name) @definition.method
; Constants: static final fields (an anonymous class in one holds its methods: `INET_ADDRESS.read`),
; an interface's fields, enum constants (a constant's own body holds its methods).
((field_declaration (modifiers) @_mods declarator: (variable_declarator name: (identifier) @name)) @definition.constant
  (#match? @_mods "(^|\\s)static(\\s|$)")
  (#match? @_mods "(^|\\s)final(\\s|$)"))
(constant_declaration declarator: (variable_declarator name: (identifier) @name)) @definition.constant
(enum_constant name: (identifier) @name) @definition.constant

; ---- references ----------------------------------------------------------

(method_invocation object: (_) @receiver name: (identifier) @name) @reference.call
(method_invocation !object name: (identifier) @name) @reference.call
(object_creation_expression
  type: [(type_identifier) @name
         (generic_type (type_identifier) @name)
         (scoped_type_identifier (type_identifier) @name .)]) @reference.call

(superclass
  [(type_identifier) @name
   (generic_type (type_identifier) @name)
   (scoped_type_identifier (type_identifier) @name .)]) @reference.inherit
(super_interfaces
  (type_list
    [(type_identifier) @name
     (generic_type (type_identifier) @name)
     (scoped_type_identifier (type_identifier) @name .)])) @reference.inherit
(extends_interfaces
  (type_list
    [(type_identifier) @name
     (generic_type (type_identifier) @name)
     (scoped_type_identifier (type_identifier) @name .)])) @reference.inherit

(([(formal_parameter
    type: [(type_identifier) @name
           (generic_type (type_identifier) @name)
           (array_type element: (type_identifier) @name)])
  (field_declaration
    type: [(type_identifier) @name
           (generic_type (type_identifier) @name)
           (array_type element: (type_identifier) @name)])
  (local_variable_declaration
    type: [(type_identifier) @name
           (generic_type (type_identifier) @name)
           (array_type element: (type_identifier) @name)])
  (method_declaration
    type: [(type_identifier) @name
           (generic_type (type_identifier) @name)
           (array_type element: (type_identifier) @name)])]) @reference.type
  (#not-eq? @name "var"))
(type_arguments (type_identifier) @name) @reference.type
; An annotation (`@SerializedName("id")`) and a class literal (`Foo.class`) use their type.
(marker_annotation name: (identifier) @name) @reference.type
(annotation name: (identifier) @name) @reference.type
(class_literal (type_identifier) @name) @reference.type

; ---- declared types: `bind` rows say which type a variable, parameter or field is declared
; with, for the calls made on it (`writer.value()` with `JsonWriter writer`); they make no edge.
(formal_parameter
  type: [(type_identifier) @name (generic_type (type_identifier) @name)]
  name: (identifier) @receiver) @reference.bind
(local_variable_declaration
  type: [(type_identifier) @name (generic_type (type_identifier) @name)]
  declarator: (variable_declarator name: (identifier) @receiver)) @reference.bind
(field_declaration
  type: [(type_identifier) @name (generic_type (type_identifier) @name)]
  declarator: (variable_declarator name: (identifier) @receiver)) @reference.bind

; ---- imports ---------------------------------------------------------------

(import_declaration) @import

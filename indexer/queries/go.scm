; MemStrata definitions, references and imports for Go.
; Methods carry @receiver (the receiver's type name) so parse.py can build T.M.

; ---- definitions -------------------------------------------------------

(function_declaration name: (identifier) @name) @definition.function

(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [(type_identifier) @receiver
             (pointer_type (type_identifier) @receiver)
             (generic_type type: (type_identifier) @receiver)
             (pointer_type (generic_type type: (type_identifier) @receiver))]))
  name: (field_identifier) @name) @definition.method

(type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface
(type_spec
  name: (type_identifier) @name
  type: [(type_identifier) (qualified_type) (pointer_type) (slice_type) (array_type)
         (map_type) (channel_type) (function_type) (generic_type)]) @definition.type
(type_alias name: (type_identifier) @name) @definition.type

(interface_type (method_elem name: (field_identifier) @name) @definition.method)

(source_file (const_declaration (const_spec name: (identifier) @name) @definition.constant))

; a package-level variable holding a function literal is a function by another spelling
; (`var defaultMergeFn = func(a, b []T) []T { .. }`, a hook tests or callers may replace)
(source_file
  (var_declaration
    (var_spec . name: (identifier) @name . value: (expression_list . (func_literal) .)) @definition.function))
(source_file
  (var_declaration
    (var_spec_list
      (var_spec . name: (identifier) @name . value: (expression_list . (func_literal) .)) @definition.function)))

; ---- references ----------------------------------------------------------

((call_expression function: (identifier) @name) @reference.call
  (#not-match? @name "^(append|cap|clear|close|complex|copy|delete|imag|len|make|max|min|new|panic|print|println|real|recover)$"))
(call_expression
  function: (selector_expression operand: (_) @receiver field: (field_identifier) @name)) @reference.call
; composite literals construct a value of the named type
(composite_literal type: (type_identifier) @name) @reference.call
(composite_literal
  type: (qualified_type package: (package_identifier) @receiver name: (type_identifier) @name)) @reference.call

; embedded struct fields and embedded interfaces
(field_declaration_list
  (field_declaration
    !name
    type: [(type_identifier) @name (pointer_type (type_identifier) @name)]) @reference.inherit)
(field_declaration_list
  (field_declaration
    !name
    type: [(qualified_type package: (package_identifier) @receiver name: (type_identifier) @name)
           (pointer_type (qualified_type package: (package_identifier) @receiver name: (type_identifier) @name))]) @reference.inherit)
(interface_type (type_elem (type_identifier) @name) @reference.inherit)

; type uses in parameters, results, fields and variables (builtins excluded)
(([(parameter_declaration
     type: [(type_identifier) @name
            (pointer_type (type_identifier) @name)
            (slice_type element: (type_identifier) @name)
            (slice_type element: (pointer_type (type_identifier) @name))])
   (variadic_parameter_declaration type: (type_identifier) @name)
   (field_declaration
     name: (_)
     type: [(type_identifier) @name
            (pointer_type (type_identifier) @name)
            (slice_type element: (type_identifier) @name)
            (slice_type element: (pointer_type (type_identifier) @name))
            (map_type value: (type_identifier) @name)
            (map_type value: (pointer_type (type_identifier) @name))])
   (var_spec
     type: [(type_identifier) @name (pointer_type (type_identifier) @name)])
   (method_declaration
     result: [(type_identifier) @name (pointer_type (type_identifier) @name)])
   (function_declaration
     result: [(type_identifier) @name (pointer_type (type_identifier) @name)])
   (method_elem
     result: [(type_identifier) @name (pointer_type (type_identifier) @name)])]) @reference.type
  (#not-match? @name "^(any|bool|byte|comparable|complex64|complex128|error|float32|float64|int|int8|int16|int32|int64|rune|string|uint|uint8|uint16|uint32|uint64|uintptr)$"))
([(parameter_declaration
    type: [(qualified_type package: (package_identifier) @receiver name: (type_identifier) @name)
           (pointer_type (qualified_type package: (package_identifier) @receiver name: (type_identifier) @name))])
  (field_declaration
    name: (_)
    type: [(qualified_type package: (package_identifier) @receiver name: (type_identifier) @name)
           (pointer_type (qualified_type package: (package_identifier) @receiver name: (type_identifier) @name))])]) @reference.type

; ---- declared types: `bind` rows say which type a variable, parameter or field is declared
; with, for the calls made on it (`writer.value()` with `JsonWriter writer`); they make no edge.
(parameter_declaration
  name: (identifier) @receiver
  type: [(type_identifier) @name (pointer_type (type_identifier) @name)]) @reference.bind
(var_spec
  name: (identifier) @receiver
  type: [(type_identifier) @name (pointer_type (type_identifier) @name)]) @reference.bind

; ---- imports ---------------------------------------------------------------

(import_spec) @import

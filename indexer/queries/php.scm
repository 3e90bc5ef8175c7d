; MemStrata definitions, references and imports for PHP.
; Traits are interfaces; `use Trait;` inside a class is inherit.
; Namespaces are not symbols.

; ---- definitions -------------------------------------------------------

(class_declaration name: (name) @name) @definition.class
(interface_declaration name: (name) @name) @definition.interface
(trait_declaration name: (name) @name) @definition.interface
(enum_declaration name: (name) @name) @definition.enum
(method_declaration name: (name) @name) @definition.method
(function_definition name: (name) @name) @definition.function
; a class's or an interface's constants, an enum's cases (`Status::Active`)
(declaration_list (const_declaration (const_element (name) @name) @definition.constant))
(enum_declaration_list (enum_case (name) @name) @definition.constant)
(enum_declaration_list (const_declaration (const_element (name) @name) @definition.constant))

; file / namespace level `const X = ...;`
(program (const_declaration (const_element (name) @name) @definition.constant))
(namespace_definition
  body: (compound_statement (const_declaration (const_element (name) @name) @definition.constant)))

; ---- references ----------------------------------------------------------

(function_call_expression function: (name) @name) @reference.call
(function_call_expression
  function: (qualified_name prefix: (_) @receiver (name) @name)) @reference.call
(member_call_expression object: (_) @receiver name: (name) @name) @reference.call
(nullsafe_member_call_expression object: (_) @receiver name: (name) @name) @reference.call
(scoped_call_expression scope: (_) @receiver name: (name) @name) @reference.call
((object_creation_expression (name) @name) @reference.call
  (#not-match? @name "^(static|self|parent)$"))
(object_creation_expression (qualified_name (name) @name .)) @reference.call

; `Foo::class`, `Foo::BAR`, `Foo::$bar` use the class Foo (`self::`, `static::` are no name)
(class_constant_access_expression . [(name) @name (qualified_name (name) @name .)]) @reference.type
(scoped_property_access_expression . [(name) @name (qualified_name (name) @name .)]) @reference.type

(base_clause [(name) @name (qualified_name (name) @name .)]) @reference.inherit
(class_interface_clause [(name) @name (qualified_name (name) @name .)]) @reference.inherit
(declaration_list
  (use_declaration [(name) @name (qualified_name (name) @name .)]) @reference.inherit)

((named_type (name) @name) @reference.type
  (#not-match? @name "^(static|self|parent)$"))
(named_type (qualified_name (name) @name .)) @reference.type

; ---- imports ---------------------------------------------------------------

(namespace_use_declaration) @import
[(require_expression) (require_once_expression)
 (include_expression) (include_once_expression)] @import

; MemStrata definitions, references and imports for C++.
; Namespaces are not symbols.  Out-of-class member definitions
; (`void Foo::bar() {}`) carry @receiver = Foo, like Go methods.
; Captures named @_x only feed predicates.

; ---- definitions -------------------------------------------------------

(class_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.class
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @definition.enum

(type_definition
  type: [(struct_specifier !name body: (_)) (union_specifier !name body: (_))]
  declarator: (type_identifier) @name) @definition.struct
(type_definition
  type: (enum_specifier !name body: (_))
  declarator: (type_identifier) @name) @definition.enum
(type_definition
  type: [(primitive_type) (sized_type_specifier) (type_identifier) (template_type)
         (qualified_identifier)
         (struct_specifier !body) (union_specifier !body) (enum_specifier !body)]
  declarator: [(type_identifier) @name
               (pointer_declarator declarator: (type_identifier) @name)]) @definition.type
(alias_declaration name: (type_identifier) @name) @definition.type

; free functions and in-class member functions
(function_definition
  declarator: [(function_declarator declarator: [(identifier) (field_identifier) (destructor_name)] @name)
               (pointer_declarator
                 declarator: (function_declarator declarator: [(identifier) (field_identifier)] @name))
               (reference_declarator
                 (function_declarator declarator: [(identifier) (field_identifier)] @name))]) @definition.function

; operators, in and out of their class: operator==, operator(), operator bool (a conversion)
(function_definition
  declarator: [(function_declarator declarator: (operator_name) @name)
               (pointer_declarator declarator: (function_declarator declarator: (operator_name) @name))
               (reference_declarator (function_declarator declarator: (operator_name) @name))
               (operator_cast) @name]) @definition.function
(function_definition
  declarator: [(function_declarator
                 declarator: (qualified_identifier
                   scope: [(namespace_identifier) @receiver (template_type name: (type_identifier) @receiver)]
                   name: (operator_name) @name))
               (reference_declarator
                 (function_declarator
                   declarator: (qualified_identifier
                     scope: [(namespace_identifier) @receiver (template_type name: (type_identifier) @receiver)]
                     name: (operator_name) @name)))
               (qualified_identifier
                 scope: [(namespace_identifier) @receiver (template_type name: (type_identifier) @receiver)]
                 name: (operator_cast) @name)]) @definition.function

; out-of-class member functions: Foo::bar, ns::Foo::bar, Box<T>::get, Foo::~Foo
(function_definition
  declarator: [(function_declarator
                 declarator: (qualified_identifier
                   scope: [(namespace_identifier) @receiver (template_type name: (type_identifier) @receiver)]
                   name: [(identifier) (destructor_name)] @name))
               (pointer_declarator
                 declarator: (function_declarator
                   declarator: (qualified_identifier
                     scope: [(namespace_identifier) @receiver (template_type name: (type_identifier) @receiver)]
                     name: [(identifier) (destructor_name)] @name)))
               (reference_declarator
                 (function_declarator
                   declarator: (qualified_identifier
                     scope: [(namespace_identifier) @receiver (template_type name: (type_identifier) @receiver)]
                     name: [(identifier) (destructor_name)] @name)))]) @definition.function
(function_definition
  declarator: (function_declarator
    declarator: (qualified_identifier
      scope: (namespace_identifier)
      name: (qualified_identifier
        scope: [(namespace_identifier) @receiver (template_type name: (type_identifier) @receiver)]
        name: [(identifier) (destructor_name)] @name)))) @definition.function

; macros wherever they sit: file level, include guards, either branch of an
; #if / #else, inside an `extern "C"` block.  A function-like macro is called
; like a function, so it is one.
(preproc_def name: (identifier) @name value: (preproc_arg)) @definition.constant
(preproc_function_def name: (identifier) @name) @definition.function
; namespace-level const / constexpr objects
((translation_unit
   (declaration
     (type_qualifier) @_const
     declarator: (init_declarator declarator: (identifier) @name)) @definition.constant)
  (#match? @_const "^(const|constexpr)$"))
((namespace_definition
   body: (declaration_list
     (declaration
       (type_qualifier) @_const
       declarator: (init_declarator declarator: (identifier) @name)) @definition.constant))
  (#match? @_const "^(const|constexpr)$"))

; ---- references ----------------------------------------------------------

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (field_expression argument: (_) @receiver field: (field_identifier) @name)) @reference.call
(call_expression
  function: (qualified_identifier scope: (_) @receiver name: (identifier) @name)) @reference.call
(call_expression function: (template_function name: (identifier) @name)) @reference.call
(call_expression
  function: (qualified_identifier
    scope: (_) @receiver
    name: (template_function name: (identifier) @name))) @reference.call
(call_expression
  function: (field_expression
    argument: (_) @receiver
    field: (template_method name: (field_identifier) @name))) @reference.call
(new_expression type: (type_identifier) @name) @reference.call
(new_expression type: (template_type name: (type_identifier) @name)) @reference.call
(new_expression
  type: (qualified_identifier scope: (_) @receiver name: (type_identifier) @name)) @reference.call

(base_class_clause
  [(type_identifier) @name
   (template_type name: (type_identifier) @name)]) @reference.inherit
(base_class_clause
  (qualified_identifier
    scope: (_) @receiver
    name: [(type_identifier) @name (template_type name: (type_identifier) @name)])) @reference.inherit

[(parameter_declaration type: (type_identifier) @name)
 (optional_parameter_declaration type: (type_identifier) @name)
 (field_declaration type: (type_identifier) @name)
 (declaration type: (type_identifier) @name)
 (function_definition type: (type_identifier) @name)
 (type_descriptor type: (type_identifier) @name)
 (type_definition type: (type_identifier) @name)] @reference.type
[(parameter_declaration type: (template_type name: (type_identifier) @name))
 (optional_parameter_declaration type: (template_type name: (type_identifier) @name))
 (field_declaration type: (template_type name: (type_identifier) @name))
 (declaration type: (template_type name: (type_identifier) @name))
 (function_definition type: (template_type name: (type_identifier) @name))] @reference.type
[(parameter_declaration
   type: (qualified_identifier scope: (_) @receiver name: (type_identifier) @name))
 (field_declaration
   type: (qualified_identifier scope: (_) @receiver name: (type_identifier) @name))
 (declaration
   type: (qualified_identifier scope: (_) @receiver name: (type_identifier) @name))
 (function_definition
   type: (qualified_identifier scope: (_) @receiver name: (type_identifier) @name))] @reference.type
; a namespaced template, `ui::Widget<int> w;`
[(parameter_declaration
   type: (qualified_identifier scope: (_) @receiver name: (template_type name: (type_identifier) @name)))
 (field_declaration
   type: (qualified_identifier scope: (_) @receiver name: (template_type name: (type_identifier) @name)))
 (declaration
   type: (qualified_identifier scope: (_) @receiver name: (template_type name: (type_identifier) @name)))
 (function_definition
   type: (qualified_identifier scope: (_) @receiver name: (template_type name: (type_identifier) @name)))] @reference.type

; ---- imports ---------------------------------------------------------------

(preproc_include) @import

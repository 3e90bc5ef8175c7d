; MemStrata definitions, references and imports for C (.c .h).
; Prototypes are not definitions; typedef'd anonymous structs/enums take the
; typedef name.  Captures named @_x only feed predicates.

; ---- definitions -------------------------------------------------------

(function_definition
  declarator: [(function_declarator declarator: (identifier) @name)
               (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
               (pointer_declarator
                 declarator: (pointer_declarator
                   declarator: (function_declarator declarator: (identifier) @name)))]) @definition.function

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
  type: [(primitive_type) (sized_type_specifier) (type_identifier)
         (struct_specifier !body) (union_specifier !body) (enum_specifier !body)]
  declarator: [(type_identifier) @name
               (pointer_declarator declarator: (type_identifier) @name)]) @definition.type

; macros wherever they sit: file level, include guards, either branch of an
; #if / #else, inside an `extern "C"` block.  A function-like macro is called
; like a function, so it is one.
(preproc_def name: (identifier) @name value: (preproc_arg)) @definition.constant
(preproc_function_def name: (identifier) @name) @definition.function
; file-level `const` objects
((translation_unit
   (declaration
     (type_qualifier) @_const
     declarator: (init_declarator declarator: (identifier) @name)) @definition.constant)
  (#eq? @_const "const"))

; ---- references ----------------------------------------------------------

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (field_expression argument: (_) @receiver field: (field_identifier) @name)) @reference.call

[(parameter_declaration type: (type_identifier) @name)
 (field_declaration type: (type_identifier) @name)
 (declaration type: (type_identifier) @name)
 (function_definition type: (type_identifier) @name)
 (type_descriptor type: (type_identifier) @name)
 (type_definition type: (type_identifier) @name)] @reference.type
[(parameter_declaration type: [(struct_specifier !body name: (type_identifier) @name)
                               (union_specifier !body name: (type_identifier) @name)
                               (enum_specifier !body name: (type_identifier) @name)])
 (field_declaration type: [(struct_specifier !body name: (type_identifier) @name)
                           (union_specifier !body name: (type_identifier) @name)
                           (enum_specifier !body name: (type_identifier) @name)])
 (declaration type: [(struct_specifier !body name: (type_identifier) @name)
                     (union_specifier !body name: (type_identifier) @name)
                     (enum_specifier !body name: (type_identifier) @name)])
 (function_definition type: [(struct_specifier !body name: (type_identifier) @name)
                             (union_specifier !body name: (type_identifier) @name)
                             (enum_specifier !body name: (type_identifier) @name)])] @reference.type

; ---- imports ---------------------------------------------------------------

(preproc_include) @import

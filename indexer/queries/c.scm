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

; object-like macros with a value, at file level or inside include guards
(translation_unit (preproc_def name: (identifier) @name value: (preproc_arg)) @definition.constant)
[(preproc_ifdef (preproc_def name: (identifier) @name value: (preproc_arg)) @definition.constant)
 (preproc_if (preproc_def name: (identifier) @name value: (preproc_arg)) @definition.constant)]
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

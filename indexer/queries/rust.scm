; MemStrata definitions, references and imports for Rust.
; `impl T { .. }` / `impl Trait for T { .. }` are @scope nodes named T: they
; prefix the qualnames of the functions inside without being symbols.

; ---- definitions -------------------------------------------------------

(function_item name: (identifier) @name) @definition.function
(trait_item
  body: (declaration_list
    (function_signature_item name: (identifier) @name) @definition.method))
(struct_item name: (type_identifier) @name) @definition.struct
(union_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(trait_item name: (type_identifier) @name) @definition.interface
(type_item name: (type_identifier) @name) @definition.type
; `macro_rules! name { .. }`: what a call spelled `name!(..)` expands to (the invocations are not
; linked: `println!`, `vec!` and the like are the standard library's, and would be looked up
; among the project's functions by name)
(macro_definition name: (identifier) @name) @definition.function
; `mod m { .. }` is a symbol; `mod m;` only points at the file m.rs (an import)
(mod_item name: (identifier) @name body: (declaration_list)) @definition.module

(source_file [(const_item name: (identifier) @name) (static_item name: (identifier) @name)] @definition.constant)
(mod_item
  body: (declaration_list
    [(const_item name: (identifier) @name) (static_item name: (identifier) @name)] @definition.constant))

; `impl From<Code> for i32`: the methods belong to the primitive type, not to the module
(impl_item
  type: [(type_identifier) @name
         (primitive_type) @name
         (generic_type type: (type_identifier) @name)
         (scoped_type_identifier name: (type_identifier) @name)
         (generic_type type: (scoped_type_identifier name: (type_identifier) @name))]) @scope

; ---- references ----------------------------------------------------------

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (field_expression value: (_) @receiver field: (field_identifier) @name)) @reference.call
(call_expression
  function: (scoped_identifier path: (_) @receiver name: (identifier) @name)) @reference.call
(call_expression
  function: (generic_function function: (identifier) @name)) @reference.call
(call_expression
  function: (generic_function
    function: (scoped_identifier path: (_) @receiver name: (identifier) @name))) @reference.call
(call_expression
  function: (generic_function
    function: (field_expression value: (_) @receiver field: (field_identifier) @name))) @reference.call
(struct_expression name: (type_identifier) @name) @reference.call
(struct_expression
  name: (scoped_type_identifier path: (_) @receiver name: (type_identifier) @name)) @reference.call

(trait_item bounds: (trait_bounds (type_identifier) @name) @reference.inherit)

((_ type: (type_identifier) @name) @reference.type (#not-eq? @name "Self"))
((_ return_type: (type_identifier) @name) @reference.type (#not-eq? @name "Self"))
((type_arguments (type_identifier) @name) @reference.type (#not-eq? @name "Self"))
((_ type: (scoped_type_identifier path: (_) @receiver name: (type_identifier) @name)) @reference.type)
((_ return_type: (scoped_type_identifier path: (_) @receiver name: (type_identifier) @name)) @reference.type)
((_ return_type: (generic_type type: (type_identifier) @name)) @reference.type (#not-eq? @name "Self"))

; ---- declared types: `bind` rows say which type a variable, parameter or field is declared
; with, for the calls made on it (`writer.value()` with `JsonWriter writer`); they make no edge.
(parameter
  pattern: (identifier) @receiver
  type: [(type_identifier) @name
         (reference_type type: (type_identifier) @name)
         (generic_type type: (type_identifier) @name)
         (reference_type type: (generic_type type: (type_identifier) @name))]) @reference.bind
(let_declaration
  pattern: (identifier) @receiver
  type: [(type_identifier) @name (generic_type type: (type_identifier) @name)]) @reference.bind
; A struct's fields: Rust composes types by holding one in a field, so most method calls of an
; `impl` are made on `self.field` (`self.io.flush()` with `io: Buffered<T>`).  A field held
; through a pointer that dereferences to its content (`inner: Arc<Inner>`, `Box<T>`, `Rc<T>`) is
; called as the content's type.
(field_declaration
  name: (field_identifier) @receiver
  type: [(type_identifier) @name
         (generic_type type: (type_identifier) @name)
         (scoped_type_identifier name: (type_identifier) @name)
         (generic_type type: (scoped_type_identifier name: (type_identifier) @name))]
  (#not-match? @name "^(Arc|Rc|Box)$")) @reference.bind
(field_declaration
  name: (field_identifier) @receiver
  type: (generic_type
    type: (type_identifier) @_pointer
    type_arguments: (type_arguments . [(type_identifier) @name
                                       (generic_type type: (type_identifier) @name)
                                       (scoped_type_identifier name: (type_identifier) @name)]))
  (#match? @_pointer "^(Arc|Rc|Box)$")) @reference.bind
; A local built by a struct literal is of that type; one an associated function of a type returns
; (`Queue::new()`) is bound to the function's path, and is of the type only if the function returns
; `Self` or the type (the graph reads that from its signature).
(let_declaration
  pattern: (identifier) @receiver
  !type
  value: (struct_expression name: (type_identifier) @name)) @reference.bind
((let_declaration
  pattern: (identifier) @receiver
  !type
  value: (call_expression function: (scoped_identifier path: (identifier) name: (identifier)) @name))
  @reference.bind (#match? @name "^[A-Z]"))
; ... or awaited, or unwrapped (`Queue::open()?`, `.unwrap()`, `.expect(..)`, after an `.await`
; too): the row's name then ends in `?` (indexer/parse.py), and the local is of the type only if
; the function returns a Result or Option of `Self` or the type.
((let_declaration
  pattern: (identifier) @receiver
  !type
  value: [(await_expression (call_expression function: (scoped_identifier path: (identifier) name: (identifier)) @name))
          (try_expression (call_expression function: (scoped_identifier path: (identifier) name: (identifier)) @name))
          (try_expression (await_expression
            (call_expression function: (scoped_identifier path: (identifier) name: (identifier)) @name)))])
  @reference.bind (#match? @name "^[A-Z]"))
((let_declaration
  pattern: (identifier) @receiver
  !type
  value: (call_expression
    function: (field_expression
      value: [(call_expression function: (scoped_identifier path: (identifier) name: (identifier)) @name)
              (await_expression
                (call_expression function: (scoped_identifier path: (identifier) name: (identifier)) @name))]
      field: (field_identifier) @_unwrap)))
  @reference.bind (#match? @name "^[A-Z]") (#match? @_unwrap "^(unwrap|expect)$"))

; ---- imports ---------------------------------------------------------------

(use_declaration) @import
(mod_item !body) @import

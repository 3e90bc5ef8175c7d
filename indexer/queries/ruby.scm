; MemStrata definitions, references and imports for Ruby.
; `Foo.new` is recorded as a call of Foo; include/extend/prepend as inherit.
; Captures named @_x only feed predicates.

; ---- definitions -------------------------------------------------------

(class name: [(constant) @name (scope_resolution name: (constant) @name)]) @definition.class
(module name: [(constant) @name (scope_resolution name: (constant) @name)]) @definition.module
(method name: (_) @name) @definition.method
(singleton_method name: (_) @name) @definition.method
; constant assignment (illegal inside methods, so always class/module/file level)
(assignment left: (constant) @name) @definition.constant
; Methods a class body makes by a call: `attr_accessor :name` (each symbol one method) and the
; new name of an alias (`alias_method :new, :old`, `alias new old`).
((call
   !receiver
   method: (identifier) @_attr
   arguments: (argument_list (simple_symbol) @name)) @definition.method
  (#match? @_attr "^attr_(reader|writer|accessor)$"))
((call
   !receiver
   method: (identifier) @_alias
   arguments: (argument_list . (simple_symbol) @name)) @definition.method
  (#eq? @_alias "alias_method"))
(alias name: (_) @name) @definition.method

; ---- references ----------------------------------------------------------

((call receiver: (_) @receiver method: (identifier) @name) @reference.call
  (#not-eq? @name "new"))
((call receiver: (constant) @name method: (identifier) @_new) @reference.call
  (#eq? @_new "new"))
((call
   receiver: (scope_resolution scope: (_) @receiver name: (constant) @name)
   method: (identifier) @_new) @reference.call
  (#eq? @_new "new"))
((call !receiver method: (identifier) @name) @reference.call
  (#not-match? @name "^(require|require_relative|include|extend|prepend|attr_reader|attr_writer|attr_accessor|private|protected|public|module_function|raise|puts|p|print|lambda|proc|loop)$"))

(superclass (constant) @name) @reference.inherit
(superclass (scope_resolution scope: (_) @receiver name: (constant) @name)) @reference.inherit
((call
   !receiver
   method: (identifier) @_mixin
   arguments: (argument_list [(constant) @name (scope_resolution name: (constant) @name)])) @reference.inherit
  (#match? @_mixin "^(include|extend|prepend)$"))

; ---- imports ---------------------------------------------------------------

((call
   !receiver
   method: (identifier) @_require
   arguments: (argument_list . (string) .)) @import
  (#match? @_require "^(require|require_relative)$"))

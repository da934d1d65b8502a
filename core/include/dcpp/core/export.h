#pragma once
// DCPP_API: what dcpp's shared libraries export.
//
// The libraries are compiled with hidden visibility (docs/design.md, "Exported symbols"): a
// declaration is visible to programs only when it carries DCPP_API. It goes on
//   - every free function of the public headers that a library defines;
//   - every class of the public headers: its out-of-line members are then exported, and its
//     typeinfo and vtable have default visibility, so they are one object in the whole process.
//     That is what makes `catch (const dcpp::CheckpointError&)` in a program match an error thrown
//     in a library, and dynamic_cast or a subclass in user code (Stateful, planners, storage,
//     ModelLayout, codecs) agree with the library about the type.
// Never on anything in dcpp::detail or in a component's src/: internals stay hidden.
// Inline functions and templates need no DCPP_API: a program compiles its own copy.

#if defined(__GNUC__) || defined(__clang__)
#define DCPP_API __attribute__((visibility("default")))
#else
#define DCPP_API
#endif

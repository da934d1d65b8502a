#!/bin/sh
# Usage: check_exports.sh <nm> <shared library>...
#
# Fails, naming them, when a dcpp shared library's dynamic symbol table defines a symbol of dcpp's
# internals or code of dcpp's own outside namespace dcpp (docs/design.md, "Exported symbols": the
# libraries are built with hidden visibility and export only DCPP_API declarations).
#   - internal: anything in dcpp::detail (also as a template argument or a parameter type), any
#     dcpp symbol with detail:: in its name, anything in an anonymous namespace;
#   - outside dcpp: a symbol neither in namespace dcpp nor in one of the namespaces of dcpp's
#     dependencies, nor one the linker, the C runtime or a sanitizer adds.
# What is allowed outside dcpp is what the dependencies' headers give default visibility when a
# dcpp library instantiates or copies it: libstdc++ templates (std::, with std::__detail::),
# libtorch's inline functions and typeinfo of its exported classes (c10::Error's, which must stay
# one object in the process for catch to work). It is theirs, not dcpp's API.
nm="$1"
shift
status=0
for library in "$@"; do
  if ! symbols=$("$nm" -D --defined-only -C "$library"); then
    echo "FAIL: cannot read the dynamic symbols of $library"
    status=1
    continue
  fi
  # "<address> <type> <name>" -> "<name>". For the namespace, a descriptor ("typeinfo for X") is
  # X, the parameter list is dropped, and a function template's return type too.
  report=$(printf '%s\n' "$symbols" | sed -E 's/^[0-9A-Fa-f]* +[A-Za-z] +//' | awk '
    BEGIN {
      dependencies = "^(std|__gnu_cxx|__cxxabiv1|c10|c10d|at|torch|caffe2|ska|ska_ordered|fmt|spdlog|tbb|oneapi|nlohmann|gloo|google|pybind11|nonstd)::"
      toolchain = "^(_init|_fini|_edata|_end|__bss_start|_DYNAMIC|_GLOBAL_OFFSET_TABLE_)$|^_*(asan|odr_asan|tsan|ubsan|lsan|sanitizer|sancov)|^__(start|stop)_"
      # What remains of the typeinfo of a function type of standard types: "bool (std::...)".
      builtin = "^(void|bool|char|signed|unsigned|short|int|long|float|double|wchar_t|char8_t|char16_t|char32_t|[ *&])*$"
    }
    # The text after the parenthesised expression that `s` starts with, "decltype(...) f" -> "f".
    function after_parentheses(s,    i, depth, c) {
      depth = 0
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "(") depth++
        if (c == ")" && --depth == 0) return substr(s, i + 1)
      }
      return s
    }
    # A name nm could not demangle (an older nm, newer C++: C++20 constraints), by its mangled
    # prefix: dcpp, a dependency, or neither.
    /^_Z/ {
      if ($0 ~ /4dcpp6detail|12_GLOBAL__N_1/) {
        print "internal:     " $0
      } else if ($0 ~ /^_Z(T[VISTH]|GV|Th|Tv|Tc)?N?[KVRO]*4dcpp/) {
        dcpp++
      } else if ($0 ~ /^_Z(T[VISTH]|GV|Th|Tv|Tc)?N?[KVRO]*(St|S[absiod]|9__gnu_cxx|10__cxxabiv1|3c10|4c10d|2at|5torch|6caffe2|3ska|11ska_ordered|3fmt|6spdlog|3tbb|6oneapi|8nlohmann|4gloo|6google|8pybind11|6nonstd)/) {
        others++
      } else {
        print "outside dcpp: " $0
      }
      next
    }
    {
      whole = $0
      name = whole
      sub(/^(typeinfo name for |typeinfo for |vtable for |VTT for |construction vtable for |guard variable for |non-virtual thunk to |virtual thunk to |covariant return thunk to |TLS init function for |TLS wrapper function for )/, "", name)
      if (name ~ /^decltype ?\(/) {
        name = after_parentheses(name)  # a template function whose return type is a decltype
        sub(/^ +/, "", name)
      }
      sub(/\(.*/, "", name)  # the parameter list
      if (name !~ /^[A-Za-z_0-9:]+::/ && name ~ /^[^<]* [A-Za-z_]/) {
        sub(/^[^<]* /, "", name)  # a function template'"'"'s return type: "void std::f<...>" -> "std::f<...>"
      }
      if (whole ~ /dcpp::detail::/ || whole ~ /\(anonymous namespace\)/ ||
          (name ~ /^dcpp::/ && name ~ /detail::/)) {
        print "internal:     " whole
      } else if (name ~ /^dcpp::/) {
        dcpp++
      } else if (name ~ dependencies || name ~ toolchain || name ~ builtin) {
        others++
      } else {
        print "outside dcpp: " whole
      }
    }
    END { printf "summary: %d in namespace dcpp, %d of its dependencies and the toolchain\n", dcpp, others }')
  summary=$(printf '%s\n' "$report" | grep '^summary: ')
  bad=$(printf '%s\n' "$report" | grep -v '^summary: ')
  if [ -n "$bad" ]; then
    echo "FAIL: $library exports symbols that are not dcpp's public API:"
    printf '%s\n' "$bad"
    status=1
  else
    echo "ok: $library (${summary#summary: })"
  fi
done
exit $status

// The translation unit that builds cmake/dcpp_precompiled.h; it has no code of its own beyond the
// empty main the executable flavour needs to link.
#ifdef DCPP_PRECOMPILED_MAIN
int main() { return 0; }
#endif

// The translation unit that builds cmake/dcpp_precompiled.h for the executables: an empty program.
int main() { return 0; }

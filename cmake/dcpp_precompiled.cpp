// The translation unit that builds cmake/dcpp_precompiled.h for the libraries; no code of its own.

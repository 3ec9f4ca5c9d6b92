// The source file of meshsim_module_pch (CMakeLists.txt): the target exists to build the modules'
// precompiled header, which every module reuses; it compiles nothing of its own.

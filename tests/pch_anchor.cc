// The source file of meshsim_test_pch (tests/CMakeLists.txt): the target exists to build the test
// suite's precompiled header, which every test binary reuses; it compiles nothing of its own.

#pragma once
// CLI11's App, declared for the cli headers that take one. <CLI/CLI.hpp> costs about 6 s of every
// file that includes it; only the files that build options (main.cc, budget.cc and the
// *_command.cc that add options) include it.

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

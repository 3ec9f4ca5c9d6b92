#include "help_markdown.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

namespace meshsim::cli {
namespace {

// Table cells hold one line: '|' escaped, newlines as spaces.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

bool listed(const CLI::Option* o, const CLI::App& app) {
  return !o->get_group().empty() && o != app.get_help_ptr();
}

// An option's identity for "the same option as on the root": its names and its help.
std::string key_of(const CLI::Option* o) { return o->get_name(false, true) + "\n" + o->get_description(); }

std::string usage(const CLI::App& sub, const std::string& command) {
  std::string u = command;
  for (const CLI::Option* o : sub.get_options()) {
    if (listed(o, sub) && !o->nonpositional()) {
      const std::string name = fmt::format("{}", o->get_name(true));
      u += o->get_required() ? " " + name : " [" + name + "]";
    }
  }
  return u + " [OPTIONS]";
}

void write_options(const CLI::App& sub, const std::set<std::string>& skip, std::ostream& out) {
  out << "| option | value | default | what it does |\n| --- | --- | --- | --- |\n";
  for (const CLI::Option* o : sub.get_options()) {
    if (!listed(o, sub) || skip.count(key_of(o)) > 0) {
      continue;
    }
    const std::string names =
        o->nonpositional() ? o->get_name(false, true) : o->get_name(true) + " (positional)";
    std::string value = o->get_type_size_max() == 0 ? "" : o->get_type_name();
    std::string description = o->get_description();
    if (o->get_required()) {
      description += " (required)";
    }
    out << fmt::format("| `{}` | {} | {} | {} |\n", cell(names), cell(value),
                       o->get_default_str().empty() ? "" : "`" + cell(o->get_default_str()) + "`",
                       cell(description));
  }
}

}  // namespace

void write_cli_markdown(const CLI::App& app, std::ostream& out) {
  out << "# The meshsim command line\n\n"
         "<!-- Generated from the command's own option definitions by `meshsim help-markdown`; "
         "do not edit by hand. Regenerate with tools/check_docs.py cli --meshsim build/meshsim "
         "--update; the test docs_cli_markdown fails when this file differs from what the binary "
         "prints. -->\n\n";
  out << app.get_description() << ".\n\n";
  out << "`meshsim --version` prints the version and the git commit of the build; `meshsim "
         "SUBCOMMAND --help` prints a subcommand's options. Sizes take units (`80GiB`, `25GB/s`, "
         "`400Gbps`, `1.5us`); decimal prefixes are powers of ten, `Ki`, `Mi`, `Gi` powers of "
         "two. Exit codes: 0 success, 2 bad input (the message names the file or flag, the field "
         "and what was expected), 3 out of memory, 4 a validation threshold exceeded, 1 an "
         "internal error.\n\n";

  std::set<std::string> root;
  for (const CLI::Option* o : app.get_options()) {
    if (listed(o, app)) {
      root.insert(key_of(o));
    }
  }
  out << "## meshsim [run]\n\n"
         "Without a subcommand, or with `run`, meshsim simulates one training step of a "
         "scenario: the default one (Llama-3-70B on 2048 H100s), a scenario file, or the "
         "default changed by these options.\n\n";
  out << "Usage: `meshsim [run] [scenario] [OPTIONS]`\n\n";
  write_options(app, {}, out);

  const std::vector<const CLI::App*> subs =
      app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
  for (const CLI::App* sub : subs) {
    if (sub->get_name() == "run") {
      continue;  // documented with the root above: the same options
    }
    const std::string command = "meshsim " + sub->get_name();
    out << fmt::format("\n## {}\n\n{}.\n\n", command, sub->get_description());
    out << fmt::format("Usage: `{}`\n\n", usage(*sub, command));
    bool shares_run_options = false;
    for (const CLI::Option* o : sub->get_options()) {
      shares_run_options = shares_run_options || (listed(o, *sub) && root.count(key_of(o)) > 0);
    }
    if (shares_run_options) {
      out << "Takes every option of `meshsim run` (above), and:\n\n";
    }
    write_options(*sub, root, out);
  }
}

}  // namespace meshsim::cli

#include "probes/hooks/enabled_functions.h"

#include <optional>

#include "probes/kernel/text.h"

namespace kpath {
namespace {

using text::Tokens;
using text::Trim;

// "function_trace_call+0x0/0x1b0" or "(kprobe_ftrace_handler+0x0/0x1c0)" -> the function name.
std::string_view SymbolOf(std::string_view text) {
  while (!text.empty() && (text.front() == '(' || text.front() == '>' || text.front() == '-')) {
    text.remove_prefix(1);
  }
  return text.substr(0, text.find_first_of("+/) "));
}

void NoteHandler(std::string_view symbol, FtraceFunction& function) {
  if (symbol.empty()) return;
  if (symbol.find("kprobe") != std::string_view::npos) function.kprobe = true;
  if (symbol.starts_with("bpf_trampoline") || symbol == "call_direct_funcs") {
    function.direct = true;
  }
  function.handler = std::string(symbol);
}

std::optional<FtraceFunction> ParseLine(std::string_view line) {
  std::vector<std::string_view> tokens = Tokens(line);
  if (tokens.size() < 2) return std::nullopt;
  FtraceFunction function;
  function.function = std::string(tokens[0]);
  size_t i = 1;
  if (tokens[i].size() > 2 && tokens[i].front() == '[' && tokens[i].back() == ']') {
    function.module = std::string(tokens[i].substr(1, tokens[i].size() - 2));
    ++i;
  }
  if (i >= tokens.size()) return std::nullopt;
  std::string_view count = tokens[i];
  if (count.size() < 3 || count.front() != '(' || count.back() != ')') return std::nullopt;
  std::optional<uint64_t> users = text::ParseDecimal(count.substr(1, count.size() - 2));
  if (!users || *users > UINT32_MAX) return std::nullopt;
  function.users = static_cast<uint32_t>(*users);
  bool in_trampoline = false;
  for (++i; i < tokens.size(); ++i) {
    std::string_view token = tokens[i];
    if (token == "tramp:") {
      in_trampoline = true;
    } else if (token == "D" && !in_trampoline) {
      function.direct = true;  // a flag column: "R I D"
    } else if (token.starts_with("direct-->")) {
      function.direct = true;
    } else if (token.starts_with("->")) {
      NoteHandler(SymbolOf(token), function);
    } else if (in_trampoline && token.starts_with('(')) {
      NoteHandler(SymbolOf(token), function);
    }
  }
  return function;
}

}  // namespace

FtraceFunctionList ParseEnabledFunctions(std::string_view text) {
  FtraceFunctionList list;
  for (std::string_view line : text::Lines(text)) {
    if (Trim(line).empty()) continue;
    // A continuation ("\tdirect-->bpf_trampoline_...") belongs to the function above it.
    if (text::IsSpace(line.front())) {
      std::string_view rest = Trim(line);
      if (list.functions.empty()) {
        ++list.unparsed_lines;
      } else if (rest.starts_with("direct-->") || rest.starts_with("(call_direct_funcs")) {
        list.functions.back().direct = true;
      }
      continue;
    }
    if (std::optional<FtraceFunction> function = ParseLine(line)) {
      list.functions.push_back(*std::move(function));
    } else {
      ++list.unparsed_lines;
    }
  }
  return list;
}

}  // namespace kpath

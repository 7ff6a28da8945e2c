#include "tools/args.h"

#include <cstdio>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace dspark::tools {

Args::Opt& Args::make(const std::string& names, const std::string& help) {
  Opt o;
  std::stringstream ss(names);
  std::string n;
  while (std::getline(ss, n, ',')) o.names.push_back(n);
  o.help = help;
  opts_.push_back(std::move(o));
  return opts_.back();
}

void Args::add(const std::string& names, std::string* out, const std::string& help) {
  Opt& o = make(names, help);
  if (!out->empty()) o.default_text = *out;
  o.set = [out](const std::string&, const std::string& v) { *out = v; return Status::ok(); };
}

void Args::add_custom(const std::string& names, const std::string& help, const std::string& default_text,
                      std::function<Status(const std::string& value)> set) {
  Opt& o = make(names, help);
  o.default_text = default_text;
  o.set = [set = std::move(set)](const std::string& name, const std::string& v) {
    if (Status st = set(v); !st) return Status::error(name + ": " + st.message());
    return Status::ok();
  };
}

void Args::add(const std::string& names, int64_t* out, const std::string& help, int64_t lo, int64_t hi) {
  Opt& o = make(names, help);
  o.default_text = std::to_string(*out);
  o.set = [out, lo, hi](const std::string& name, const std::string& v) {
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE)
      return Status::error(name + ": '" + v + "' is not an integer");
    if (x < lo || x > hi)
      return Status::error(name + ": " + v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = x;
    return Status::ok();
  };
}

void Args::add(const std::string& names, double* out, const std::string& help, double lo, double hi) {
  Opt& o = make(names, help);
  std::ostringstream d;
  d << *out;
  o.default_text = d.str();
  o.set = [out, lo, hi](const std::string& name, const std::string& v) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x)) return Status::error(name + ": '" + v + "' is not a number");
    if (x < lo || x > hi) {
      std::ostringstream r;
      r << name << ": " << v << " is out of range [" << lo << ", " << hi << "]";
      return Status::error(r.str());
    }
    *out = x;
    return Status::ok();
  };
}

void Args::add_flag(const std::string& names, bool* out, const std::string& help) {
  Opt& o = make(names, help);
  o.takes_value = false;
  o.set = [out](const std::string&, const std::string&) { *out = true; return Status::ok(); };
}

void Args::add_list(const std::string& names, std::vector<std::string>* out, const std::string& help) {
  Opt& o = make(names, help);
  o.set = [out](const std::string&, const std::string& v) { out->push_back(v); return Status::ok(); };
}

Status Args::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") { help_ = true; return Status::ok(); }
    if (a.empty() || a[0] != '-' || a == "-") { positional_.push_back(a); continue; }
    std::string value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      if (eq != std::string::npos) { value = a.substr(eq + 1); a = a.substr(0, eq); has_inline = true; }
    }
    Opt* opt = nullptr;
    for (Opt& o : opts_)
      for (const std::string& n : o.names)
        if (n == a) opt = &o;
    if (!opt) return Status::error("unknown option '" + a + "' (see --help)");
    if (opt->takes_value && !has_inline) {
      if (i + 1 >= argc) return Status::error(a + ": missing value");
      value = argv[++i];
    }
    DSPARK_RETURN_IF_ERROR(opt->set(a, value));
  }
  return Status::ok();
}

std::string Args::help() const {
  std::string out = "usage: " + usage_ + "\n\n" + summary_ + "\n\noptions:\n";
  for (const Opt& o : opts_) {
    std::string names;
    for (const auto& n : o.names) names += (names.empty() ? "" : ", ") + n;
    if (o.takes_value) names += " V";
    std::string line = "  " + names;
    if (line.size() < 28) line.resize(28, ' '); else line += "  ";
    // Help text may span lines ('\n'): continuation lines line up under the first.
    for (char c : o.help) {
      line += c;
      if (c == '\n') line += std::string(28, ' ');
    }
    if (!o.default_text.empty()) line += " (default: " + o.default_text + ")";
    out += line + "\n";
  }
  out += "  -h, --help                show this help\n";
  return out;
}

Result<std::vector<int>> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  size_t p = 0;
  while (p <= text.size()) {
    size_t q = text.find(',', p);
    if (q == std::string::npos) q = text.size();
    const std::string item = text.substr(p, q - p);
    size_t used = 0;
    try {
      out.push_back(std::stoi(item, &used));
    } catch (...) {
      used = std::string::npos;
    }
    if (used != item.size()) return Status::error(flag + ": expected comma-separated integers, got '" + text + "'");
    p = q + 1;
  }
  return out;
}

void print_note(const std::string& text) { std::fprintf(stderr, "%s\n", text.c_str()); }

int VerbError::operator()(const std::string& message, int code) const {
  std::fprintf(stderr, "dspark %s: %s\n", verb, message.c_str());
  return code;
}

std::optional<int> parse_verb_args(Args& args, int argc, char** argv, const VerbError& fail, int first) {
  if (Status st = args.parse(argc, argv, first); !st) return fail(st.message());
  if (args.help_requested()) {
    std::printf("%s", args.help().c_str());
    return 0;
  }
  return std::nullopt;
}

}  // namespace dspark::tools

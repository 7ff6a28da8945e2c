#include "serve/host_check.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace dspark::serve {

namespace {

constexpr const char* kLoopbackNames[] = {"localhost", "127.0.0.1", "[::1]"};

bool is_ip_literal(const std::string& name) {
  unsigned char buf[16];
  if (name.size() > 2 && name.front() == '[' && name.back() == ']')
    return ::inet_pton(AF_INET6, name.substr(1, name.size() - 2).c_str(), buf) == 1;
  return ::inet_pton(AF_INET, name.c_str(), buf) == 1;
}

bool all_digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit((unsigned char)c); });
}

}  // namespace

std::string host_name_of(std::string_view v) {
  std::string_view name;
  if (!v.empty() && v.front() == '[') {  // [IPv6]:port
    const size_t close = v.find(']');
    if (close == std::string_view::npos) return "";
    const std::string_view rest = v.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !all_digits(rest.substr(1)))) return "";
    name = v.substr(0, close + 1);
  } else {
    const size_t colon = v.find(':');
    name = v.substr(0, colon);
    if (colon != std::string_view::npos && !all_digits(v.substr(colon + 1))) return "";
  }
  std::string out(name);
  for (char& c : out) c = (char)std::tolower((unsigned char)c);
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

HostCheck::HostCheck(const std::string& listen_host, const std::vector<std::string>& allowed_hosts) {
  for (const char* n : kLoopbackNames) names_.emplace_back(n);
  std::string listen = listen_host;
  unsigned char buf[16];
  if (::inet_pton(AF_INET6, listen.c_str(), buf) == 1) listen = "[" + listen + "]";  // as a Host header writes it
  if (listen.empty() || listen == "0.0.0.0" || listen == "[::]") any_ip_ = true;
  else names_.push_back(host_name_of(listen));
  for (const std::string& a : allowed_hosts) {
    if (a == "*") any_ = true;
    else if (std::string n = host_name_of(a); !n.empty()) names_.push_back(std::move(n));
  }
}

bool HostCheck::allows(std::string_view host_header) const {
  if (any_ || host_header.empty()) return true;
  const std::string name = host_name_of(host_header);
  if (name.empty()) return false;
  if (std::find(names_.begin(), names_.end(), name) != names_.end()) return true;
  return any_ip_ && is_ip_literal(name);
}

}  // namespace dspark::serve

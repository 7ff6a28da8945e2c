// Which `Host` header values `dspark serve` answers: a defence against DNS rebinding, where a page
// on evil.example re-points its own name at 127.0.0.1 and then reads the local server as
// "same origin". The browser still sends `Host: evil.example`, so refusing names the server does
// not know (421 Misdirected Request) defeats it.
//
// Allowed: the loopback names (localhost, 127.0.0.1, [::1]); the address given to --host; any IP
// literal when the server listens on every address (0.0.0.0 or ::), since a rebinding attack needs
// a name and clients of such a server reach it by any of the machine's addresses; the names of
// --allowed-hosts (a "*" entry allows every Host). Ports are not compared (a load balancer in front
// forwards its own), names are compared case-insensitively, a trailing dot ignored. A request with
// no Host (HTTP/1.0) is allowed: browsers always send one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dspark::serve {

class HostCheck {
 public:
  HostCheck(const std::string& listen_host, const std::vector<std::string>& allowed_hosts);
  bool allows(std::string_view host_header) const;

 private:
  std::vector<std::string> names_;  // normalised (lower case, no port, IPv6 in brackets)
  bool any_ = false;                // a "*" entry
  bool any_ip_ = false;             // listening on every address: IP literals allowed
};

// The host part of a Host header value, normalised as above ("" when it is malformed).
std::string host_name_of(std::string_view host_header);

}  // namespace dspark::serve

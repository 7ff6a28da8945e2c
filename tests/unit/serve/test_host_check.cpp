// The Host check of dspark serve (serve/host_check.h): loopback names, the listen address, IP
// literals on a wildcard listener, --allowed-hosts, any port, malformed values refused.
#include <gtest/gtest.h>

#include "serve/host_check.h"

namespace dspark::serve {
namespace {

TEST(HostCheck, NormalisesTheHostPart) {
  EXPECT_EQ(host_name_of("Example.COM:8080"), "example.com");
  EXPECT_EQ(host_name_of("example.com."), "example.com");
  EXPECT_EQ(host_name_of("[::1]:80"), "[::1]");
  EXPECT_EQ(host_name_of("[::1]"), "[::1]");
  EXPECT_EQ(host_name_of("[::1"), "");
  EXPECT_EQ(host_name_of("a:b"), "");
  EXPECT_EQ(host_name_of("[::1]x"), "");
}

TEST(HostCheck, LoopbackListenerAnswersItsOwnNamesOnly) {
  const HostCheck h("127.0.0.1", {});
  for (const char* ok : {"localhost", "localhost:8080", "127.0.0.1", "127.0.0.1:9", "[::1]", "[::1]:8080", "LOCALHOST",
                         ""})
    EXPECT_TRUE(h.allows(ok)) << ok;
  for (const char* bad : {"evil.example", "evil.example:8080", "10.0.0.1", "localhost.evil.example", "[::1", "t"})
    EXPECT_FALSE(h.allows(bad)) << bad;
}

TEST(HostCheck, ListenAddressAndAllowedHosts) {
  const HostCheck h("192.168.1.5", {"api.example", "Other.Example:443"});
  EXPECT_TRUE(h.allows("192.168.1.5:8080"));
  EXPECT_TRUE(h.allows("api.example"));
  EXPECT_TRUE(h.allows("other.example:8080"));
  EXPECT_FALSE(h.allows("192.168.1.6"));
  EXPECT_FALSE(h.allows("evil.example"));
  const HostCheck v6("::1", {});
  EXPECT_TRUE(v6.allows("[::1]:8080"));
}

TEST(HostCheck, WildcardListenerAllowsIpLiteralsButNotNames) {
  for (const char* any : {"0.0.0.0", "::"}) {
    const HostCheck h(any, {});
    EXPECT_TRUE(h.allows("10.1.2.3:8080")) << any;
    EXPECT_TRUE(h.allows("[fe80::1]")) << any;
    EXPECT_FALSE(h.allows("evil.example")) << any;
    EXPECT_FALSE(h.allows("10.1.2")) << any;
  }
}

TEST(HostCheck, StarAllowsEverything) {
  const HostCheck h("127.0.0.1", {"*"});
  EXPECT_TRUE(h.allows("evil.example"));
}

}  // namespace
}  // namespace dspark::serve

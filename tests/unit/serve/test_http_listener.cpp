// The HTTP listener of dspark serve (serve/http_listener.h) over real loopback sockets: deadlines
// instead of gaps (a trickling head or body gets 408), inline routes answered while every handler
// thread is busy, the per-address connection limit, the lingering close after 413 (the client reads
// the whole error although it sent a body the server never wanted), keep-alive and pipelining.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "serve/http_listener.h"

namespace dspark::serve {
namespace {

using Clock = std::chrono::steady_clock;

// A listener on a free loopback port, run on its own thread. GET /slow blocks its handler thread
// until release(); every other route answers "ok <path>". /health is an inline route.
class Server {
 public:
  explicit Server(HttpListenerOptions opt) {
    opt.host = "127.0.0.1";
    opt.port = 0;
    listener_ = std::make_unique<HttpListener>(
        opt,
        [this](const HttpRequest& req, HttpConn&) {
          HttpReply r;
          if (req.path == "/slow") {
            std::unique_lock lk(mu_);
            ++blocked_;
            cv_.notify_all();
            cv_.wait(lk, [&] { return released_; });
          }
          r.body = "ok " + req.path;
          return r;
        },
        [](int status, const std::string& message) {
          return "{\"error\":{\"status\":" + std::to_string(status) + ",\"message\":\"" + message + "\"}}";
        },
        [](const HttpRequest*, int, size_t) {});
    listener_->set_inline([](const HttpRequest& req) { return req.path == "/health"; });
    EXPECT_TRUE(listener_->bind().is_ok());
    thread_ = std::thread([this] { listener_->run(); });
  }
  ~Server() {
    release();
    listener_->stop();
    thread_.join();
  }
  int port() const { return listener_->port(); }
  void wait_blocked(int n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return blocked_ >= n; });
  }
  void release() {
    std::lock_guard lk(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::unique_ptr<HttpListener> listener_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int blocked_ = 0;
  bool released_ = false;
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, (sockaddr*)&a, sizeof a), 0);
  return fd;
}

void send_str(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), (ssize_t)s.size()); }

// Everything the server sends until it closes (or `wait_s` passes without a byte).
std::string read_all(int fd, double wait_s = 5.0) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, (int)(wait_s * 1000)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, (size_t)n);
  }
  return out;
}

// Reads until `needle` has arrived (or 5 s).
std::string read_until(int fd, const std::string& needle) {
  std::string out;
  char buf[4096];
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (out.find(needle) == std::string::npos && Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, (size_t)n);
  }
  return out;
}

// Sends `piece` every `every_ms` (never a silent gap) until the server answers, at most `times`
// times; returns the answer ("" if none came).
std::string trickle(int fd, const std::string& piece, int every_ms, int times) {
  for (int i = 0; i < times; ++i) {
    if (::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL) < 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, every_ms) > 0) return read_all(fd, 1.0);
  }
  return "";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(HttpListener, PipelinedRequestsAnsweredInOrderOnOneConnection) {
  Server srv({});
  const int fd = connect_to(srv.port());
  send_str(fd, "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /health HTTP/1.1\r\nHost: h\r\n\r\n"
               "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  const std::string r = read_all(fd);
  ::close(fd);
  const size_t a = r.find("ok /a"), h = r.find("ok /health"), b = r.find("ok /b");
  ASSERT_NE(a, std::string::npos) << r;
  ASSERT_NE(h, std::string::npos) << r;
  ASSERT_NE(b, std::string::npos) << r;
  EXPECT_TRUE(a < h && h < b) << r;
}

TEST(HttpListener, TricklingHeadGets408AtTheHeadDeadline) {
  HttpListenerOptions opt;
  opt.head_timeout_s = 1;
  Server srv(opt);
  const int fd = connect_to(srv.port());
  const auto t0 = Clock::now();
  send_str(fd, "GET /a HTTP/1.1\r\n");
  const std::string r = trickle(fd, "X-A: b\r\n", 200, 20);  // a header line every 200 ms: the head never ends
  const double dt = seconds_since(t0);
  ::close(fd);
  EXPECT_NE(r.find("HTTP/1.1 408 "), std::string::npos) << r;
  EXPECT_NE(r.find("\"status\":408"), std::string::npos) << r;
  // The answer came while the client was still sending (trickle() stops at the answer), so no gap
  // timeout fired; and not before the deadline. (No upper bound: a paused test machine stretches it.)
  EXPECT_GE(dt, 0.9);
}

TEST(HttpListener, SlowBodyGets408AtTheBodyDeadline) {
  HttpListenerOptions opt;
  opt.head_timeout_s = 1;
  opt.min_body_rate = 1000;  // 2000 bytes: due 1 s + 2 s after the first byte
  Server srv(opt);
  const int fd = connect_to(srv.port());
  const auto t0 = Clock::now();
  send_str(fd, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2000\r\n\r\n");
  const std::string r = trickle(fd, "0123456789", 100, 60);  // 100 bytes/s
  const double dt = seconds_since(t0);
  ::close(fd);
  EXPECT_NE(r.find("HTTP/1.1 408 "), std::string::npos) << r;
  EXPECT_GT(dt, 2.5);  // the body's allowance counts: not the head deadline alone
}

TEST(HttpListener, InlineRouteAnswersWhileEveryHandlerIsBusy) {
  HttpListenerOptions opt;
  opt.max_handlers = 1;
  Server srv(opt);
  const int slow = connect_to(srv.port());
  send_str(slow, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
  srv.wait_blocked(1);
  const int busy = connect_to(srv.port());
  send_str(busy, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_NE(read_all(busy).find("HTTP/1.1 503 "), std::string::npos);  // no handler thread left
  ::close(busy);
  const int health = connect_to(srv.port());
  send_str(health, "GET /health HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_NE(read_all(health).find("ok /health"), std::string::npos);  // the loop answers it
  ::close(health);
  srv.release();
  EXPECT_NE(read_until(slow, "ok /slow").find("ok /slow"), std::string::npos);
  ::close(slow);
}

TEST(HttpListener, ConnectionsPerAddressAreCapped) {
  HttpListenerOptions opt;
  opt.max_connections_per_ip = 2;
  Server srv(opt);
  const int a = connect_to(srv.port()), b = connect_to(srv.port());
  send_str(a, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_NE(read_until(a, "ok /a").find("ok /a"), std::string::npos);  // both are accepted and kept
  const int c = connect_to(srv.port());
  const std::string r = read_all(c);
  EXPECT_NE(r.find("HTTP/1.1 503 "), std::string::npos) << r;
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos) << r;
  ::close(c);
  ::close(a);
  ::close(b);
  // Closed connections no longer count.
  std::string again;
  for (int i = 0; i < 20 && again.find("ok /c") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int d = connect_to(srv.port());
    send_str(d, "GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    again = read_all(d);
    ::close(d);
  }
  EXPECT_NE(again.find("ok /c"), std::string::npos) << again;
}

TEST(HttpListener, OversizeBodyGetsTheWhole413BeforeTheClose) {
  HttpListenerOptions opt;
  opt.limits.max_body_bytes = 1024;
  Server srv(opt);
  const int fd = connect_to(srv.port());
  const int sndbuf = 64 * 1024;  // small: most of the body is still to send when the server answers
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  const size_t body = 12 << 20;  // more than the socket buffers hold, less than the linger discards
  std::string req = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body) + "\r\n\r\n";
  req += std::string(body, 'x');
  // Send it all first (as simple clients do), then read: without the lingering close, the unread
  // body makes the server's close a reset and the send fails or the reply is lost.
  size_t sent = 0;
  while (sent < req.size()) {
    const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += (size_t)n;
  }
  EXPECT_EQ(sent, req.size());
  const std::string r = read_all(fd);
  ::close(fd);
  EXPECT_NE(r.find("HTTP/1.1 413 "), std::string::npos) << r.substr(0, 200);
  const size_t at = r.find("\r\n\r\n");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(r.substr(at + 4).front(), '{');
  EXPECT_EQ(r.back(), '}');  // the whole JSON body
}

TEST(HttpListener, IdleKeepAliveConnectionClosesQuietly) {
  HttpListenerOptions opt;
  opt.idle_timeout_s = 1;
  Server srv(opt);
  const int fd = connect_to(srv.port());
  send_str(fd, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
  const auto t0 = Clock::now();
  const std::string r = read_all(fd, 3.0);
  const double dt = seconds_since(t0);
  ::close(fd);
  EXPECT_NE(r.find("ok /a"), std::string::npos);
  EXPECT_EQ(r.find("408"), std::string::npos) << r;  // an idle connection is not a late request
  EXPECT_LT(dt, 2.5);
}

}  // namespace
}  // namespace dspark::serve

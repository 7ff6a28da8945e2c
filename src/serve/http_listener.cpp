#include "serve/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

namespace dspark::serve {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kLingerTime = std::chrono::seconds(5);  // lingering close: longest wait for the client's EOF
constexpr size_t kLingerBytes = 16u << 20;             // ... and most input discarded meanwhile
constexpr size_t kReadChunk = 64 * 1024;               // bytes per recv
constexpr int kReadsPerWake = 16;                      // recv calls per connection per loop pass (fairness)
constexpr int kMaxPollMs = 1000;                       // the loop re-checks deadlines at least this often
constexpr rlim_t kFdReserve = 64;                      // descriptors kept for everything but connections
constexpr int kListenBacklog = 512;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // out of descriptors: retry accepting after this
// Input held for requests still arriving, all connections together: past it, connections in the
// middle of a request are not read (TCP holds their clients back; their deadlines still run) while
// new requests (/health) still are. Bounds memory against many concurrent slow uploads.
constexpr size_t kMaxBufferedInput = 256u << 20;

std::string status_line(int minor, int status) {
  return "HTTP/1." + std::to_string(minor) + " " + std::to_string(status) + " " + http_reason(status) + "\r\n";
}

std::string hex(size_t n) {
  char b[20];
  std::snprintf(b, sizeof b, "%zx", n);
  return b;
}

// Blocking send of everything (handler threads; the socket's send timeout bounds a stalled client).
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // reset, closed, or the send timeout (a client that stopped reading)
    }
    data.remove_prefix((size_t)n);
  }
  return true;
}

// Status line and header fields of a reply, up to the empty line.
std::string reply_head(int minor, const HttpReply& reply, bool keep_alive) {
  const bool streamed = (bool)reply.next;
  std::string head = status_line(minor, reply.status);
  head += "Content-Type: " + reply.content_type + "\r\n";
  for (const auto& [k, v] : reply.headers) head += k + ": " + v + "\r\n";
  if (!streamed) head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  else if (minor == 1) head += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive) head += "Connection: close\r\n";
  else if (minor == 0) head += "Connection: keep-alive\r\n";
  return head + "\r\n";
}

// The client's address ("" if unknown): the key of the per-address connection limit.
std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, (sockaddr*)&ss, &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) ::inet_ntop(AF_INET, &((sockaddr_in*)&ss)->sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6) ::inet_ntop(AF_INET6, &((sockaddr_in6*)&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

// Reads and drops whatever input is already queued on a socket, so that closing it sends a FIN
// after our reply rather than a reset that can destroy the reply before the client reads it.
void discard_queued_input(int fd) {
  char tmp[kReadChunk];
  for (int i = 0; i < kReadsPerWake; ++i)
    if (::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT) <= 0) break;
}

}  // namespace

// A connection while the loop owns it (not while a handler thread has it).
struct HttpListener::Conn {
  int fd = -1;
  std::string ip;
  std::string in;   // received bytes not yet consumed by a request
  std::string out;  // bytes queued for the client (written as the socket accepts them)
  bool eof = false;            // the client shut down its sending side
  bool owned = false;          // a handler thread has the connection
  bool sent_continue = false;  // 100 Continue sent for the request now arriving
  bool close_after = false;    // close (lingering) once `out` is written; input is discarded
  bool lingering = false;      // our sending side is shut; discarding input until EOF or the bounds
  size_t discarded = 0;        // input bytes dropped while closing
  bool in_request = false;     // the current request has started arriving
  Clock::time_point request_start;  // its first byte
  Clock::time_point deadline;       // of whatever the connection waits for (see check_deadlines)
};

bool HttpConn::client_gone(bool headers_sent) {
  if (gone_) return true;
  pollfd p{fd_, POLLRDHUP, 0};  // POLLERR / POLLHUP are always reported
  if (::poll(&p, 1, 0) > 0) {
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return gone_ = true;
    if (p.revents & POLLRDHUP) eof_ = true;
  }
  if (eof_ && !headers_sent) {
    if (minor_ == 0) return gone_ = true;  // no interim responses in HTTP/1.0: an EOF is a goodbye
    if (!probed_) {
      // A client that only half-closed reads this and waits for the final response; one that
      // closed answers with a reset, which the next call sees as POLLERR / POLLHUP.
      probed_ = true;
      static constexpr std::string_view kProbe = "HTTP/1.1 102 Processing\r\n\r\n";
      if (::send(fd_, kProbe.data(), kProbe.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) gone_ = true;
    }
  }
  return gone_;
}

HttpListener::HttpListener(HttpListenerOptions opt, Handler handler, ErrorBody error_body, Logger logger)
    : opt_(std::move(opt)), handler_(std::move(handler)), error_body_(std::move(error_body)), logger_(std::move(logger)) {}

HttpListener::~HttpListener() {
  stop();
  for (auto& [fd, c] : conns_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

Status HttpListener::bind() {
  const std::string where = opt_.host + ":" + std::to_string(opt_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(opt_.host.c_str(), std::to_string(opt_.port).c_str(), &hints, &res); rc != 0)
    return Status::error("cannot bind " + where + ": " + ::gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, kListenBacklog) == 0) {
      listen_fd_ = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) return Status::error("cannot bind " + where + " (" + why + ")");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(listen_fd_, (sockaddr*)&ss, &len);
  port_ = ss.ss_family == AF_INET6 ? ntohs(((sockaddr_in6*)&ss)->sin6_port) : ntohs(((sockaddr_in*)&ss)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return Status::error(std::string("pipe: ") + std::strerror(errno));
  // Every open connection is a descriptor: raise the soft limit as far as the connection cap needs
  // (and the hard limit allows), else lower the cap to what fits.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    const rlim_t want = (rlim_t)opt_.max_connections + kFdReserve;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
      rlimit raised = rl;
      raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
      if (rl.rlim_cur < want) {
        opt_.max_connections = (int)std::max<rlim_t>(1, rl.rlim_cur > kFdReserve ? rl.rlim_cur - kFdReserve : 1);
        std::fprintf(stderr, "dspark serve: open-file limit %llu: at most %d connections\n",
                     (unsigned long long)rl.rlim_cur, opt_.max_connections);
      }
    }
  }
  return Status::ok();
}

void HttpListener::stop() {
  if (stopping_.exchange(true)) return;
  if (wake_[1] >= 0) {
    const char b = 1;
    (void)!::write(wake_[1], &b, 1);
  }
}

void HttpListener::run() {
  std::vector<pollfd> fds;
  std::vector<Conn*> polled;
  while (!stopping_) {
    fds.clear();
    polled.clear();
    // Out of descriptors, the listening socket stays readable: leave it out of the poll for a while
    // instead of spinning on it.
    fds.push_back({listen_fd_, (short)(Clock::now() >= accept_paused_until_ ? POLLIN : 0), 0});
    fds.push_back({wake_[0], POLLIN, 0});
    const size_t max_buffered = opt_.limits.max_head_bytes + opt_.limits.max_body_bytes;
    size_t buffered = 0;
    for (auto& [fd, c] : conns_) buffered += c->in.size();
    for (auto& [fd, c] : conns_) {
      if (c->owned) continue;
      short ev = 0;
      if (!c->out.empty()) ev |= POLLOUT;
      const bool room = c->in.empty() || (c->in.size() < max_buffered && buffered < kMaxBufferedInput);
      if (!c->eof && (c->lingering || c->close_after || room)) ev |= POLLIN;
      fds.push_back({fd, ev, 0});
      polled.push_back(c.get());
    }
    const int n = ::poll(fds.data(), fds.size(), poll_timeout_ms(Clock::now()));
    if (n < 0 && errno != EINTR) break;
    if (stopping_) break;
    if (n > 0) {
      if (fds[1].revents & POLLIN) {
        char tmp[64];
        while (::read(wake_[0], tmp, sizeof tmp) > 0) {
        }
      }
      // Connections may close while this pass runs: look each one up by descriptor first.
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto it = conns_.find(fds[i].fd);
        if (it == conns_.end() || it->second.get() != polled[i - 2]) continue;
        Conn& c = *it->second;
        if (fds[i].revents & (POLLERR | POLLNVAL)) {
          close_now(c.fd);
          continue;
        }
        if (fds[i].revents & (POLLIN | POLLHUP)) on_readable(c);
        it = conns_.find(fds[i].fd);
        if (it != conns_.end() && it->second.get() == polled[i - 2] && (fds[i].revents & POLLOUT))
          on_writable(*it->second);
      }
      if (fds[0].revents & POLLIN) accept_all();
    }
    take_returned();
    check_deadlines(Clock::now());
  }
  // Cut the connections handler threads still hold (streams were given their drain time by the
  // caller), wait for the threads, then close everything.
  std::unique_lock lk(mu_);
  for (auto& [fd, c] : conns_)
    if (c->owned) ::shutdown(fd, SHUT_RDWR);
  cv_.wait(lk, [&] { return handlers_ == 0; });
  lk.unlock();
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
  per_ip_.clear();
}

void HttpListener::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until_ = Clock::now() + kAcceptPause;
      return;  // EAGAIN: none left
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{opt_.io_timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::string ip = peer_address(fd);
    if ((int)conns_.size() >= opt_.max_connections) {
      refuse(fd, "too many open connections; retry later");
      continue;
    }
    if (opt_.max_connections_per_ip > 0 && per_ip_[ip] >= opt_.max_connections_per_ip) {
      refuse(fd, "too many open connections from your address; retry later");
      continue;
    }
    ++per_ip_[ip];
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->ip = std::move(ip);
    c->deadline = Clock::now() + std::chrono::seconds(opt_.idle_timeout_s);  // idle until its first byte
    conns_.emplace(fd, std::move(c));
  }
}

// Over a connection limit: a best-effort 503 on a socket the loop never keeps.
void HttpListener::refuse(int fd, const std::string& message) {
  const std::string body = error_body_(503, message);
  const std::string msg = status_line(1, 503) + "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  discard_queued_input(fd);
  (void)!::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
  logger_(nullptr, 503, body.size());
}

void HttpListener::close_now(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  auto ip = per_ip_.find(it->second->ip);
  if (ip != per_ip_.end() && --ip->second <= 0) per_ip_.erase(ip);
  ::close(fd);
  conns_.erase(it);
}

void HttpListener::on_readable(Conn& c) {
  const int fd = c.fd;
  const bool discard = c.lingering || c.close_after;
  char tmp[kReadChunk];
  for (int i = 0; i < kReadsPerWake; ++i) {
    const ssize_t k = ::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (k > 0) {
      if (!discard) {
        c.in.append(tmp, (size_t)k);
        continue;
      }
      c.discarded += (size_t)k;
      if (c.discarded > kLingerBytes) return close_now(fd);
      continue;
    }
    if (k == 0) {
      c.eof = true;
      if (c.lingering) return close_now(fd);  // the client has read our reply and closed
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return close_now(fd);  // reset
  }
  if (!discard) process(c);
}

void HttpListener::on_writable(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return close_now(c.fd);
    }
    c.out.erase(0, (size_t)n);
    c.deadline = Clock::now() + std::chrono::seconds(opt_.io_timeout_s);  // progress: a fresh write deadline
  }
  if (!c.out.empty()) return;
  if (c.close_after) return start_close(c);
  process(c);
}

void HttpListener::start_close(Conn& c) {
  c.close_after = true;
  if (!c.out.empty()) return;  // on_writable comes back here when the reply is out
  if (c.eof) return close_now(c.fd);  // all input was read: a plain close sends no reset
  ::shutdown(c.fd, SHUT_WR);
  c.lingering = true;
  c.deadline = Clock::now() + kLingerTime;
}

void HttpListener::process(Conn& c) {
  while (!c.owned && !c.close_after && c.out.empty()) {
    const auto now = Clock::now();
    if (c.in.empty()) {
      if (c.eof) return close_now(c.fd);  // nothing (more) to answer
      c.deadline = now + std::chrono::seconds(opt_.idle_timeout_s);  // idle: wait for the next request
      return;
    }
    if (!c.in_request) {
      c.in_request = true;
      c.request_start = now;
    }
    HttpRequest req;
    const ParseResult r = parse_http_request(c.in, opt_.limits, &req);
    if (r.state == ParseState::kIncomplete) {
      auto until = c.request_start + std::chrono::seconds(opt_.head_timeout_s);
      if (r.head_done) {
        const uint64_t length = std::strtoull(std::string(req.header("content-length")).c_str(), nullptr, 10);
        until += std::chrono::milliseconds(1000 * length / (uint64_t)std::max<int64_t>(1, opt_.min_body_rate));
        if (req.expect_continue && !c.sent_continue) {
          if (head_check_) {
            if (std::optional<HttpReply> early = head_check_(req)) {
              queue_reply(c, &req, *early, false);
              logger_(&req, early->status, early->body.size());
              return;
            }
          }
          c.sent_continue = true;
          c.out += "HTTP/1.1 100 Continue\r\n\r\n";
        }
      }
      if (c.eof) return close_now(c.fd);  // the client stopped sending: nothing to answer
      c.deadline = c.out.empty() ? until : std::min(until, now + std::chrono::seconds(opt_.io_timeout_s));
      return;
    }
    if (r.state == ParseState::kError) return queue_error(c, r.status, r.message);
    c.in.erase(0, r.consumed);
    c.in_request = false;
    c.sent_continue = false;
    if (inline_ && inline_(req)) {
      HttpConn conn(c.fd, req.minor);
      HttpReply reply;
      try {
        reply = handler_(req, conn);
      } catch (const std::exception& e) {
        reply.status = 500;
        reply.body = error_body_(500, std::string("internal error: ") + e.what());
      }
      queue_reply(c, &req, reply, req.keep_alive && !stopping_);
      logger_(&req, reply.status, reply.body.size());
      continue;  // the loop ends here while the reply is queued; on_writable resumes it
    }
    return dispatch(c, std::move(req));
  }
}

void HttpListener::queue_reply(Conn& c, const HttpRequest* req, const HttpReply& reply, bool keep_alive) {
  const int minor = req ? req->minor : 1;
  c.out += reply_head(minor, reply, keep_alive);
  if (!(req && req->method == "HEAD")) c.out += reply.body;
  c.deadline = Clock::now() + std::chrono::seconds(opt_.io_timeout_s);
  if (!keep_alive) c.close_after = true;  // the loop writes it when the socket is writable
}

void HttpListener::queue_error(Conn& c, int status, const std::string& message) {
  HttpReply reply;
  reply.status = status;
  reply.body = error_body_(status, message);
  if (status == 408 || status == 503) reply.headers.emplace_back("Retry-After", "1");
  logger_(nullptr, status, reply.body.size());
  queue_reply(c, nullptr, reply, false);
}

void HttpListener::dispatch(Conn& c, HttpRequest req) {
  {
    std::lock_guard lk(mu_);
    if (handlers_ < opt_.max_handlers) {
      ++handlers_;
      c.owned = true;
    }
  }
  if (c.owned) {
    try {
      std::thread([this, fd = c.fd, eof = c.eof, r = req]() mutable { handle_in_thread(fd, eof, std::move(r)); })
          .detach();
      return;
    } catch (const std::system_error&) {  // no thread to be had (a process or memory limit): busy
      std::lock_guard lk(mu_);
      --handlers_;
      c.owned = false;
    }
  }
  HttpReply reply;
  reply.status = 503;
  reply.body = error_body_(503, "too many requests in progress; retry later");
  reply.headers.emplace_back("Retry-After", "1");
  logger_(&req, 503, reply.body.size());
  queue_reply(c, &req, reply, false);
}

void HttpListener::handle_in_thread(int fd, bool eof, HttpRequest req) {
  HttpConn conn(fd, req.minor);
  conn.eof_ = eof;
  bool keep = false, ok = false;
  try {  // the connection must come back to the loop whatever happens (stop() waits for it)
    HttpReply reply = handler_(req, conn);
    keep = req.keep_alive && !stopping_ && !conn.gone_;
    size_t bytes = 0;
    ok = !conn.gone_ && write_reply(fd, conn, &req, reply, keep, &bytes);
    logger_(&req, reply.status, bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dspark serve: %s %s: %s\n", req.method.c_str(), req.path.c_str(), e.what());
  }
  {
    std::lock_guard lk(mu_);
    returned_.push_back({fd, keep && ok, conn.gone_ || !ok, conn.eof_});
    const char b = 0;
    (void)!::write(wake_[1], &b, 1);  // under the lock: run() returns (and the pipe closes) only after
    --handlers_;                      // the last thread has left this block
    cv_.notify_all();
  }
}

void HttpListener::take_returned() {
  std::vector<Returned> back;
  {
    std::lock_guard lk(mu_);
    back.swap(returned_);
  }
  for (const Returned& r : back) {
    auto it = conns_.find(r.fd);
    if (it == conns_.end()) continue;
    Conn& c = *it->second;
    c.owned = false;
    c.eof = c.eof || r.eof;
    if (r.gone) {
      close_now(r.fd);
    } else if (!r.keep) {
      start_close(c);
    } else {
      process(c);  // a pipelined request may be waiting already; else it waits idle
    }
  }
}

// What a connection waits for decides what its deadline means: a lingering close or a reply
// being written (close), a request arriving (408), or the next request of an idle keep-alive
// connection (close quietly).
void HttpListener::check_deadlines(Clock::time_point now) {
  std::vector<int> expired;
  for (auto& [fd, c] : conns_)
    if (!c->owned && now >= c->deadline) expired.push_back(fd);
  for (int fd : expired) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    Conn& c = *it->second;
    if (c.lingering || c.close_after || !c.out.empty() || !c.in_request) close_now(fd);
    else queue_error(c, 408, "the request did not arrive in time");
  }
}

int HttpListener::poll_timeout_ms(Clock::time_point now) const {
  auto next = now + std::chrono::milliseconds(kMaxPollMs);
  if (accept_paused_until_ > now) next = std::min(next, accept_paused_until_);
  for (const auto& [fd, c] : conns_)
    if (!c->owned) next = std::min(next, c->deadline);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return (int)std::clamp<int64_t>(ms + 1, 0, kMaxPollMs);
}

bool HttpListener::write_reply(int fd, HttpConn& conn, const HttpRequest* req, HttpReply& reply, bool keep_alive,
                               size_t* body_bytes) {
  const int minor = req ? req->minor : 1;
  const bool streamed = (bool)reply.next;
  if (streamed && minor == 0) keep_alive = false;  // HTTP/1.0: the body ends with the connection
  const std::string head = reply_head(minor, reply, keep_alive);
  if (!streamed) {
    *body_bytes = reply.body.size();
    if (req && req->method == "HEAD") return send_all(fd, head);
    return send_all(fd, head + reply.body);
  }
  auto finish = [&](bool complete) {
    if (reply.done) reply.done(complete);
    return complete;
  };
  if (!send_all(fd, head)) return finish(false);
  std::string piece;
  for (;;) {
    piece.clear();
    const bool more = reply.next(&piece);
    if (!piece.empty()) {
      *body_bytes += piece.size();
      const std::string framed = minor == 1 ? hex(piece.size()) + "\r\n" + piece + "\r\n" : piece;
      if (!send_all(fd, framed)) return finish(false);
    }
    if (!more) break;
    if (conn.client_gone(true)) return finish(false);
    if (conn.eof_ && !conn.probed_ && !reply.probe.empty()) {
      conn.probed_ = true;
      if (!send_all(fd, minor == 1 ? hex(reply.probe.size()) + "\r\n" + reply.probe + "\r\n" : reply.probe))
        return finish(false);
    }
  }
  if (minor == 1 && !send_all(fd, "0\r\n\r\n")) return finish(false);
  return finish(true);
}

}  // namespace dspark::serve

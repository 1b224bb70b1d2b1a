#include "common/wake_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace normsweep {
namespace {

// A listening socket on 127.0.0.1 and a free port.
int Listen(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(listen(fd, 8), 0);
  socklen_t len = sizeof addr;
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  *port = ntohs(addr.sin_port);
  return fd;
}

// What civetweb's listening thread does when told to stop: it only notices
// once its poll() of the listening socket returns. Here the "stop" waits for
// a connection (giving up after 30 s, so that a broken StopListener fails
// instead of hanging).
TEST(StopListenerTest, ConnectsWhileStopWaitsForTheListeningSocket) {
  int port = 0;
  const int fd = Listen(&port);
  int stops = 0;
  bool woken = false;
  StopListener(port, [&] {
    ++stops;
    pollfd p{fd, POLLIN, 0};
    woken = poll(&p, 1, 30000) == 1;
  });
  EXPECT_EQ(stops, 1);
  EXPECT_TRUE(woken);
  close(fd);
}

TEST(StopListenerTest, NoPortJustStops) {
  int stops = 0;
  StopListener(0, [&] { ++stops; });
  EXPECT_EQ(stops, 1);
}

}  // namespace
}  // namespace normsweep

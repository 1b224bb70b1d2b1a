#include "common/wake_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace normsweep {

void StopListener(int port, const std::function<void()>& stop) {
  if (port <= 0) {
    stop();
    return;
  }
  absl::Notification stopped;
  std::thread waker([port, &stopped] {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return;
      (void)connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
      close(fd);
    }
  });
  stop();
  stopped.Notify();
  waker.join();
}

}  // namespace normsweep

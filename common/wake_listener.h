// Ends a civetweb server (prometheus::Exposer's /metrics) without its wait.
// civetweb's mg_stop() only sets a flag; the listening thread sees it when
// its poll() of the listening socket returns, which it does every 2 s when
// nobody connects, so destroying an Exposer took 1-2 s. A connection made
// meanwhile returns the poll at once.
#ifndef NORMSWEEP_COMMON_WAKE_LISTENER_H_
#define NORMSWEEP_COMMON_WAKE_LISTENER_H_

#include <functional>

namespace normsweep {

// Runs stop() (e.g. the Exposer's destruction) while connecting to
// 127.0.0.1:port every 20 ms until stop() returns. Each connection is closed
// unused; a server that is not listening there just waits as before.
void StopListener(int port, const std::function<void()>& stop);

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_WAKE_LISTENER_H_

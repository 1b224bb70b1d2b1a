// JSON string quoting for the text the CLI writes by hand.
#ifndef NORMSWEEP_CLIENT_JSON_TEXT_H_
#define NORMSWEEP_CLIENT_JSON_TEXT_H_

#include <string>

namespace normsweep::client {

// s as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& s);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_JSON_TEXT_H_

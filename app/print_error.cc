#include <iostream>

#include "app/commands.h"

namespace monarch::app {

void print_error(const std::string& where, const std::string& message) {
  std::cerr << "monarch-sim: error: " << (where.empty() ? "" : where + ": ") << message << "\n";
}

}  // namespace monarch::app

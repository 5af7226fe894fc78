#include "app/cli.h"

int main(int argc, char** argv) { return monarch::app::main_cli(argc, argv); }

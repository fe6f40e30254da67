#include <string.h>
#include "../calc.h"

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "add") == 0) return add(2, 3) == 5 ? 0 : 1;
    return 2;
}

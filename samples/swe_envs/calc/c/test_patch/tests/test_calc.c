#include <string.h>
#include "../calc.h"

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "add") == 0) return add(2, 3) == 5 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "sub") == 0) return sub(5, 3) == 2 ? 0 : 1;
    return 2;
}

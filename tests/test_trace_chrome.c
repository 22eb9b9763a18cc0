#include "support.h"
int main(void){return 0;}

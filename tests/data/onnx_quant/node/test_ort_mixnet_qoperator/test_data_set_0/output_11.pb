By_quantizedJê
jÖ¦
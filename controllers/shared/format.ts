// The data format every container Capstan creates is labelled with (io.capstan.format). ONE
// constant for both controllers: a container without it, or with an older value, is of an older
// format and gets upgraded. Two copies could drift apart, and bumping one would mark every
// container of the other controller as old.
export const formatLabel = "io.capstan.format";

/** The data format containers are created with now. */
export const currentFormat = "2";

/* The normalisation and shape types (src/layers/reshape.c,
 * layernorm_runs.c): their argument checking, their specs printed back, and
 * their values against computations made by other means: a transpose worked
 * by hand, the algebraic identity transpose:BxA ∘ transpose:AxB = identity,
 * PyTorch's LayerNorm in float64, the cokernel's dimension from the
 * Jacobian's singular values.  The layer battery on
 * each of them runs in t-layers.c and t-check-layer.c with every other
 * built-in type. */
#include "fixtures/clirun.h"
#include "fixtures/testutil.h"
#include "vijp/certify.h"
#include "vijp/layer.h"
#include "vijp/net.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bad arguments: a code and a message, never an instance. */
START_TEST(bad_arguments_refused)
{
    static const struct {
        const char *spec;
        size_t width;
        int rc;
    } bad[] = {
        {"identity:2", 8, VIJP_EINVAL},     /* takes no argument */
        {"flatten:1", 8, VIJP_EINVAL},      /* takes no argument */
        {"dropout", 8, VIJP_EINVAL},        /* the probability is required */
        {"dropout:", 8, VIJP_EINVAL},
        {"dropout:1.5", 8, VIJP_EINVAL},    /* not a probability */
        {"dropout:-0.1", 8, VIJP_EINVAL},
        {"dropout:nan", 8, VIJP_EINVAL},
        {"dropout:0.1x", 8, VIJP_EINVAL},   /* trailing junk */
        {"transpose", 8, VIJP_EINVAL},      /* shape required */
        {"transpose:2", 8, VIJP_EINVAL},
        {"transpose:2x", 8, VIJP_EINVAL},
        {"transpose:0x4", 8, VIJP_EINVAL},
        {"transpose:2x-4", 8, VIJP_EINVAL},
        {"transpose:+2x4", 8, VIJP_EINVAL},
        {"transpose:2x3", 8, VIJP_EDIM},    /* 8 is not a multiple of 6 */
        {"transpose:1x4", 8, VIJP_EINVAL},  /* the identity: a permutation type must not be diagonal */
        {"transpose:4x1", 8, VIJP_EINVAL},
        {"transpose:4294967296x4294967296", 8, VIJP_EINVAL}, /* past VIJP_WIDTH_MAX: a·b would wrap */
        {"layernorm:1", 8, VIJP_EINVAL},    /* nothing to normalise */
        {"layernorm:3", 8, VIJP_EDIM},      /* 8 is not a multiple of 3 */
        {"layernorm:16", 8, VIJP_EDIM},
        {"layernorm:eps=-1", 8, VIJP_EINVAL},
        {"layernorm:eps=nan", 8, VIJP_EINVAL},
        {"layernorm:eps=inf", 8, VIJP_EINVAL},
        {"layernorm:eps=", 8, VIJP_EINVAL},
        {"layernorm:eps=1e-5x", 8, VIJP_EINVAL},
        {"layernorm:affine:eps=0.1", 8, VIJP_EINVAL}, /* the order is N, eps=, affine */
        {"layernorm:affine:4", 8, VIJP_EINVAL},
        {"layernorm:affine:affine", 8, VIJP_EINVAL},
        {"layernorm:4:", 8, VIJP_EINVAL},   /* an empty argument */
        {"layernorm::affine", 8, VIJP_EINVAL},
        {"layernorm:bias", 8, VIJP_EINVAL},
        {"layernorm:-4", 8, VIJP_EINVAL},
        {"actnorm", 8, VIJP_EINVAL},        /* the channel count is required */
        {"actnorm:0", 8, VIJP_EINVAL},
        {"actnorm:3", 8, VIJP_EDIM},        /* 8 is not a multiple of 3 */
        {"actnorm:2:affine", 8, VIJP_EINVAL}, /* takes nothing else */
        {"batchnorm", 8, VIJP_EINVAL},
        {"batchnorm:3", 8, VIJP_EDIM},
        {"batchnorm:2:eps=-1", 8, VIJP_EINVAL},
        {"batchnorm:2:eps=inf", 8, VIJP_EINVAL},
        {"batchnorm:2:eps=", 8, VIJP_EINVAL},
        {"batchnorm:2:affine:eps=0.1", 8, VIJP_EINVAL}, /* the order is C, eps=, affine */
        {"batchnorm:2:bias", 8, VIJP_EINVAL},
        {"batchnorm:2:affine:", 8, VIJP_EINVAL},
        {"batchnorm:2x2", 8, VIJP_EINVAL},
        {"groupnorm", 8, VIJP_EINVAL},
        {"groupnorm:2", 8, VIJP_EINVAL},
        {"groupnorm:3x4", 8, VIJP_EINVAL},  /* 3 groups do not divide 4 channels */
        {"groupnorm:0x4", 8, VIJP_EINVAL},
        {"groupnorm:1x3", 8, VIJP_EDIM},    /* 8 is not a multiple of 3 channels */
        {"groupnorm:4x4", 4, VIJP_EDIM},    /* a group of one unit */
        {"groupnorm:2x4:eps=-1", 8, VIJP_EINVAL},
        {"groupnorm:2x4:affine:eps=1", 8, VIJP_EINVAL},
        {"groupnorm:2x4:bias", 8, VIJP_EINVAL},
        {"logsoftmax:1", 8, VIJP_EINVAL},   /* y = 0: nothing left */
        {"logsoftmax:3", 8, VIJP_EDIM},
        {"logsoftmax:x", 8, VIJP_EINVAL},
        {"logsoftmax:", 8, VIJP_EINVAL},
        {"logsoftmax", 1, VIJP_EDIM},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_layer L;
        vijp_error err = {0};
        int rc = vijp_layer_parse(&L, bad[k].spec, bad[k].width, &err);
        ck_assert_msg(rc == bad[k].rc && err.msg[0], "'%s' at width %zu: code %d (want %d), message '%s'", bad[k].spec,
                      bad[k].width, rc, bad[k].rc, err.msg);
        ck_assert_ptr_null(L.type);
    }
    /* through the command: exit 2, the item named, nothing on stdout */
    run_result r = run_vijp("grad --net dense:8,dropout:2 --depth 2");
    ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, "dropout:2"), "exit %d, err '%s'", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* Every item prints back as a spec that parses to the same instance. */
START_TEST(specs_print_back)
{
    static const struct {
        const char *item, *printed;
        size_t width;
    } items[] = {
        {"identity", "identity", 5},         {"flatten", "flatten", 5},
        {"dropout:0.1", "dropout:0.1", 5},   {"dropout:0", "dropout:0", 5},
        {"dropout:1", "dropout:1", 5},       {"dropout:1e-7", "dropout:1e-07", 5},
        {"transpose:2x3", "transpose:2x3", 12}, {"transpose:4x2", "transpose:4x2", 8},
        {"layernorm", "layernorm", 6},       {"layernorm:", "layernorm", 6}, /* plain, as before */
        {"layernorm:3", "layernorm:3", 6},   {"layernorm:affine", "layernorm:affine", 6},
        {"layernorm:eps=0.00001", "layernorm:eps=1e-05", 6},
        {"layernorm:2:eps=0:affine", "layernorm:2:eps=0:affine", 6},
        {"actnorm:3", "actnorm:3", 6},       {"batchnorm:3", "batchnorm:3", 6},
        {"batchnorm:2:eps=1e-3:affine", "batchnorm:2:eps=0.001:affine", 6},
        {"batchnorm:6:affine", "batchnorm:6:affine", 6}, {"batchnorm:1:eps=0", "batchnorm:1:eps=0", 6},
        {"groupnorm:2x4", "groupnorm:2x4", 8}, {"groupnorm:1x2:eps=0.5:affine", "groupnorm:1x2:eps=0.5:affine", 8},
        {"logsoftmax", "logsoftmax", 8},     {"logsoftmax:4", "logsoftmax:4", 8},
    };
    for (size_t k = 0; k < sizeof items / sizeof *items; k++) {
        vijp_layer L, R;
        char s1[64], s2[64];
        ck_assert(!vijp_layer_parse(&L, items[k].item, items[k].width, NULL));
        vijp_layer_spec(&L, s1, sizeof s1);
        ck_assert_str_eq(s1, items[k].printed);
        ck_assert(!vijp_layer_parse(&R, s1, items[k].width, NULL));
        vijp_layer_spec(&R, s2, sizeof s2);
        ck_assert_str_eq(s1, s2);
        ck_assert(L.in == items[k].width && L.out == items[k].width && R.in == L.in);
        vijp_layer_clear(&L), vijp_layer_clear(&R);
    }
}
END_TEST

/* forward of `spec` on one sample x (n units, double) into y. */
static void forward_one(const char *spec, size_t n, const double *x, double *y)
{
    vijp_layer L;
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    ck_assert(!vijp_layer_parse(&L, spec, n, NULL));
    vijp_mat X = {.rows = n, .cols = 1, .fmt = &F, .d = (double *)x}, Y = {.rows = n, .cols = 1, .fmt = &F, .d = y};
    ck_assert(!vijp_layer_forward(&L, NULL, &X, &Y, NULL));
    vijp_layer_clear(&L);
}

/* transpose:2x3 on two runs of six, worked by hand: [[0 1 2] [3 4 5]]ᵀ =
 * [[0 3] [1 4] [2 5]]; and transpose:3x2 undoes it, on any width. */
START_TEST(transpose_values)
{
    double x[12], y[12], z[12];
    for (size_t i = 0; i < 12; i++) x[i] = (double)i;
    forward_one("transpose:2x3", 12, x, y);
    static const double want[12] = {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11};
    for (size_t i = 0; i < 12; i++) ck_assert_msg(y[i] == want[i], "y[%zu] = %g, want %g", i, y[i], want[i]);
    forward_one("transpose:3x2", 12, y, z);
    for (size_t i = 0; i < 12; i++) ck_assert(z[i] == x[i]);
    /* the identity types leave a row as it is, bit for bit */
    static const char *const same[] = {"identity", "flatten", "dropout:0.5"};
    for (size_t k = 0; k < sizeof same / sizeof *same; k++) {
        x[3] = -0.0, x[5] = 0x1p-1074;
        forward_one(same[k], 12, x, y);
        ck_assert_msg(!memcmp(x, y, sizeof x), "%s changed its input", same[k]);
    }
}
END_TEST

/* PyTorch 1.13's LayerNorm(N, eps, elementwise_affine) on a batch of
 * token-major sequences, GroupNorm(G, C, eps, affine) and BatchNorm1d(C,
 * eps, affine) in eval mode on channel-major ones, LogSoftmax(dim=-1), in
 * float64, printed by scripts/torch-norm-reference.py (PyTorch needed
 * only to rerun it): weight, bias, running statistics, x and g drawn by
 * torch, y = layer(x), (y·g).sum().backward(), gx = x.grad, gtheta =
 * (weight.grad, bias.grad).  torch's LayerNorm normalises by the biased
 * variance and eval BatchNorm by running_var, as the layers do. */
static const struct {
    const char *spec;
    size_t width, B, gtheta_count; /* torch has no gradient for running statistics (buffers) */
    double theta[16], x[16], g[16], y[16], gx[16], gtheta[16];
} torch_cases[] = {
    {"layernorm:3:eps=0.5:affine", 6, 2, 6,
     {0.3255015423575558, -0.47914491621978522, 1.3790082614212824, 2.5285573053756747, 0.41074166368137599, -0.9880071189627424},
     {0.66135217157045223, 0.26692409829251879, 0.061677258237348306, 0.62131732868542155, -0.45190596470388295, -0.16613023453557194, -1.5227684840130555, 0.38168390241818895, -1.0276085758313882, -0.56305279865378843, -0.89229050878103411, -0.058250179083696361},
     {-0.19550957739962468, -0.96563593116834268, 0.42241532118215536, 0.26731699794736563, -0.42119515675461361, -0.51069999928319654, -1.5726652135630592, -0.12324775762032961, 3.586989310317374, -1.8312901364228844, 1.5987003148762056, -1.27700703480527},
     {2.6724453303122497, 0.45104909835459245, -1.4815907568190438, 2.7688355173196419, 0.66907343068357761, -1.2624666841583785, 2.2858675710734189, -0.082594814690764448, -1.379688861180622, 2.5043192133745373, 0.64714743585501056, -0.20493066450394659},
     {-0.46720119497974416, 0.17044436102100258, 0.29675683395874142, 0.24038029892231183, 0.42545456426189393, -0.66583486318420571, -2.0963604153376716, -1.0332655529951562, 3.129625968332828, 0.5479112703479756, 0.22905936265267024, -0.77697063300064584},
     {1.4198262829321751, -0.60736155380570145, -1.7935230874786898, -3.3321479294382028, 0.088621469332919478, 2.2216975974110627}},
    {"layernorm:4:eps=1e-05:affine", 8, 2, 8,
     {-0.84113242523102738, -0.29079723404402846, -0.14798073595196234, -0.92664780277793057, -1.3256446023402191, 1.4205227748095219, -0.41900747195651883, 0.357686571123635},
     {-0.7860438449599233, -0.43889457693124367, 1.3663715670342029, -0.50944220548069152, -1.6145725463338843, 0.43522737374460985, -0.054511818355231272, -0.52628326243658574, -2.0912963129162514, 0.10606233730461478, 0.77471502464030684, -1.1378328071601045, -1.5108884588019207, -1.1412530802719292, -0.50360731700796246, 0.58660154029707889},
     {-2.1129341111627009, 0.44002604178405413, 1.1727995060788767, 0.48589960208970973, 0.63545520547246814, -1.4711947512059713, 1.750044398740185, 0.74165454679361331, 1.0997339570526952, 0.49527880378893802, -1.2089799475582681, 0.076215896797360488, 1.5235730700890506, 0.53769042536041889, 0.31983834739269679, 1.3516594875327341},
     {-0.64040413303615606, 1.5389299676336663, -0.67232613365621519, 0.81173464641715676, -0.023275439809844433, 1.0849927334961362, -0.49421452996409754, 0.46304458721444974, -0.18260449937986281, 1.2384241093525969, -0.60106496101394169, 0.81874317778709016, -0.4075061970535257, 1.6028638799002053, -0.44479683562716921, -1.0733484862862812},
     {1.4332541991187362, -0.62703958807599247, 0.23491475497061376, -1.0411293660133576, 0.28930152210292126, 0.42890384731792897, -0.2067311083047943, -0.51147426111605609, -0.18221821360340018, -0.1142504058080004, -0.01652836313505579, 0.31299698254645636, -0.90317355276351341, 0.57582981404950018, 0.82502937025388556, -0.49768563153987211},
     {-2.4200948687524084, -1.9036829666108845, 1.4654087535268714, 1.7270544796001193, 1.1458281214515131, 0.0018005197274395535, 2.0337023046534903, 2.6554295332134177}},
    {"layernorm:5:eps=0", 5, 2, 0,
     {0},
     {0.8032760780963506, 0.17483339327910355, 0.088978095025878931, -0.61371800772935781, 0.04618245168476013, -1.3682591776659838, 0.33749509853046344, 1.0111158511791591, -1.4351793230898824, 0.97743180007706032},
     {0.52204993827484758, 1.2379166964530786, -0.86463556291160415, 0.29896084440536186, 0.41921865516194434, -0.079854320808396495, 0.92641082541519204, 0.81567751692199564, 0.49518900821919865, -0.16431697802558881},
     {1.5629511376999825, 0.16648662045869572, -0.024292714752535999, -1.5857559915297768, -0.11938905187636599, -1.1640274127473911, 0.39597878946118337, 1.0120420564468611, -1.2252295702743048, 0.98123613711365165},
     {0.082532263302680597, 1.9953070484019411, -2.6327846307194314, 0.31294275685096851, 0.24200256216384053, -0.32744408629313415, 0.44522247640892892, 0.28565470409774546, 0.20425606051633299, -0.6076891547298735},
     {0}},
    {"batchnorm:2:eps=1e-05:affine", 6, 2, 4,
     {-0.72893842717113444, -0.9131688216613062, -0.051331128665746212, 0.10714673734558125, 1.1335047461482648, -0.2715340914691674, 0.65727227702449575, 0.64660636675677652},
     {-1.6052762948770103, 0.23248570595798024, 2.23987006611963, 0.84729382161912192, 1.2006442576704193, -0.40155032608088304, -1.4260196629326141, 0.90393172099769836, 0.85571557369755502, 0.68888094394122157, 0.88498569894699042, 1.7706430143923884},
     {-0.080942931174530594, 0.051263897969363606, -0.86875655982792799, -0.27574613646950302, -1.2717220168249534, 0.8816379301214663, -0.66396894441442678, 0.26389747114876122, 0.16104624644020532, 1.1758316541158109, -0.36151340850032876, 0.46814496688152207},
     {2.4111459527443095, 0.75878793640272924, -1.0460799615540077, -1.1634010999370261, -1.564668021396479, 0.25479397045899727, 2.2499737592605298, 0.15508125132196343, 0.19843307678810101, -0.9835064648668268, -1.2062042269075146, -2.2119621040117772},
     {0.07277694344080049, -0.046092101545308017, 0.78111140900116016, 0.31313900308698767, 1.4441753188312838, -1.0011934384888275, 0.59698394427926982, -0.23727397875612025, -0.14479897624735369, -1.3352816350653411, 0.4105368430171713, -0.53162829443916337},
     {0.99719720502178122, -0.78111951616619513, -1.1374608198585552, 0.61663298932401411}},
    {"batchnorm:3:eps=0.1", 6, 2, 0,
     {0.44792784964186655, -0.60882355244264585, 0.23894620161912536, 1.0443263485663865, 1.3732018451637813, 1.2798354517944923},
     {-0.48678075071242677, -0.60382158788400386, -0.55809623082367688, 0.66752430153448961, -0.19741509323400558, 1.9427835329161933, -1.4017020125953694, -0.76255713602849418, 0.63121340712964702, -0.89913516288647544, -0.55779344357826066, 0.69071878842584022},
     {0.22245857875011651, -0.66622526805816706, 0.68464220450535296, 0.57400158906499565, -0.58288269346516774, 0.76794150669844885, 0.057092657777795354, -1.1893745840814036, -0.56588487770445028, -0.83265376882251685, 0.90144867062674183, 0.21157113304359276},
     {-0.87377837006533154, -0.98318974372349488, 0.041793698490892137, 1.0515693649134121, -0.37147754976278191, 1.4504891347836524, -1.7290592657831774, -1.1315779028530319, 1.021653206830208, -0.23918463518400415, -0.67827026523149836, 0.3845972948939882},
     {0.20795731875543791, -0.62279648288199252, 0.56406940000034633, 0.47291377863136969, -0.49621228399839962, 0.65375420009580598, 0.053370996518990847, -1.1118436110268608, -0.46622650683160288, -0.68601454701011189, 0.76740982151968329, 0.18011204712833725},
     {0}},
    {"groupnorm:2x4:eps=1e-05:affine", 8, 2, 8,
     {-1.9198360473137068, 0.029085238718443956, 0.039814441841576974, -0.44808205199680623, -0.42461393812227871, -1.1098602434191416, -0.73217043183849484, 0.27593603871754285},
     {1.1311597480135762, 1.8577334370676899, -0.79724940101409614, 0.85746158706011788, 1.0608518118958832, -1.4820737902901031, -0.14195071635913678, 1.5768577842735347, -0.66632747345521159, -1.0244819046242157, 1.8866820718824076, 0.51845211286952519, -0.43105580533098176, -0.022572869442787906, -0.34104138078484519, -0.20617199352312962},
     {-0.12150851580640523, 0.38755805098425428, -0.85894464599612474, -0.025597306551116986, 0.87531657778675609, -0.68957305239720101, 1.9181486495170577, 0.38644289546560806, 0.35984728995877324, -0.62201640877178499, -1.0371325066194135, 0.34876283292633314, -0.94501652260855018, 1.5670969465379847, -0.23095027511492516, 0.44863174208639384},
     {-1.1533852233706348, -2.5888145045196174, -1.1565372689619191, -1.1070113234214125, -0.70493208459110968, -0.79071666566249366, 0.42604215704340992, -0.22651715298316261, 0.99881743163334291, 1.6022060197177539, -1.0662640301834814, -1.1011856475707855, -0.7789525716229958, -0.6732837677359792, 0.54037366877426418, 0.14772586392549145},
     {0.44742985936842444, -0.42168478759247802, -0.1808963466265775, 0.15515127485063104, 0.22380870320561744, 0.24311515083240043, -0.49985811242466144, 0.032934258386643461, -0.84087981693113478, 0.75876387107185028, 0.12750726319526365, -0.045391317335979231, -0.092094824669661887, 0.48058710436356383, 0.80773296617086676, -1.1962252458647689},
     {0.78063894511717058, -0.074595117068909519, 5.0410122393862098, 0.055424481872400344, 0.0038804163648372691, -1.5729116262403222, 0.8078239493189896, 2.5222730119541343}},
    {"groupnorm:1x3:eps=0.1", 6, 2, 0,
     {0},
     {-0.1467950974849952, 0.78614129872353578, 0.9468216090039564, -1.1143440212610307, 1.6907901257942333, -0.89482787917263862, -0.35562502700621362, 1.2323857451651945, 0.13817266368739245, -1.6821984860536687, 0.31767831539796804, 0.13280696453151092},
     {0.13732409647332361, 0.24054612860502139, 1.3954507962006726, 1.3470226203485132, 2.4382081623118323, 0.202758282866977, 2.4505412457460647, 2.0256017922932585, 1.7791550193449599, -0.91793073464733577, -0.45781890986397766, -0.72447329475094702},
     {-0.33712876689982069, 0.54119026974156026, 0.6924637926808368, -1.2480339926880324, 1.3928777904778473, -1.0413690933123914, -0.34303273675517304, 1.3619691731168586, 0.18714377116093356, -1.7673368541439443, 0.37987387372872622, 0.18138277289259858},
     {-0.63961410810326047, -0.89442318641744945, 0.13224615217468449, 0.86431154620194617, 0.83326452777579552, -0.29578493163171637, 2.1065711938229361, 0.56168482845662226, 1.0472060863244006, -0.60064528034318343, -1.4776269319916782, -1.6371898962690972},
     {0}},
    {"logsoftmax:4", 8, 2, 0,
     {0},
     {-4.8508059475059166, -0.088559845872032222, -0.99382298838523031, 1.1979315584291668, -1.6535791339299619, 2.5842203404611128, 3.1470389085663228, -0.34927671590246623, 2.0014609280457356, -3.9035067190468205, 1.0575079438366932, -1.553197369045386, 3.8789790697271238, -0.96493006015057814, 2.5681929898440199, -0.40098739802499311},
     {-0.058013752602566721, -0.5241633190399102, 0.6655926511748026, -0.1591351069977307, -1.7277479522760137, 0.23692879597545549, 1.0742052783534235, -0.003534131938536471, 0.2205060483790568, 0.97012451777899633, 1.1141951243020656, 0.44225108177674488, -0.058436590589598374, -2.2287494203935538, -1.6187637473845764, 1.6042890495945079},
     {-6.3782712205633825, -1.6160251189294987, -2.5212882614426966, -0.32953371462829967, -5.2756930706985905, -1.0378935963075162, -0.47507502820230607, -3.9713906526710954, -0.35094116257969821, -6.2559088096722544, -1.2948941467887405, -3.9055994596708197, -0.25567065877752287, -5.0995797886552241, -1.5664567386606267, -4.5356371265296396},
     {-0.057885176605781637, -0.50911884174290323, 0.67167717107438873, -0.10467315272570389, -1.7255991427434823, 0.38574521472635148, 1.3354694442887662, 0.0043844837283643079, -1.7135051587525405, 0.9648526547095222, 0.36169701310601599, 0.38695549093700221, 1.723962482827728, -2.2147108804578854, -1.1382146274009095, 1.6289630250310669},
     {0}},
};

/* max |v_k| over count values */
static double max_abs(const double *v, size_t count)
{
    double m = 0;
    for (size_t k = 0; k < count; k++) m = fmax(m, fabs(v[k]));
    return m;
}

/* The ε of a spec item (0 where it gives none), read here. */
static double eps_of(const char *spec, double none)
{
    const char *e = strstr(spec, "eps=");
    return e ? strtod(e + 4, NULL) : none;
}

/* Both sides approximate the same exact values.  Each value is a chain of
 * at most 2T + 16 roundings (sums of T terms, Higham eq. 3.5, and a few
 * single operations) of terms bounded by S:
 *   layernorm  T = N + runs (groupnorm: N = width/G, w and b per channel),  S = max(1, |w|)·max(1, |g|)·(1 + 2 max|x|/s)³ + |b|,
 *              the cancellation x − μ amplifying by max|x|/s, |ŷ| <= 2 max|x|/s;
 *   logsoftmax T = N,         S = max(1, |g|)·(1 + max|x|) (y = (x − max) − log Σ, Σ in [1, N]);
 *   batchnorm  T = B·S_pos,   S = max(1, |w|)·max(1, |g|)·(1 + (max|x| + max|rm|)/sd) + |b|,
 * s and sd the smallest over the runs or channels, computed here from x and
 * θ.  Each side errs by at most (2T + 16)·u·T·S, the tolerance twice that.
 * A variance off by N/(N − 1) (unbiased), the batch's statistics instead
 * of the running ones, an ε outside the root, a weight on the wrong unit:
 * each is off by 1e-2 or more. */
static double torch_tolerance(const char *spec, size_t n, size_t B, const double *th, const double *x, const double *g)
{
    size_t N = 0, C = 0, G = 0, T, W;
    double xs = max_abs(x, n * B), gs = fmax(1, max_abs(g, n * B)), S;
    int affine = strstr(spec, ":affine") != NULL;
    if (sscanf(spec, "layernorm:%zu", &N) == 1 || sscanf(spec, "groupnorm:%zux%zu", &G, &C) == 2) {
        double smin = INFINITY, eps = eps_of(spec, G ? 1e-5 : 0);
        W = G ? C : N; /* weights: one per channel (groupnorm), per unit of a run (layernorm) */
        N = G ? n / G : N;
        for (size_t r = 0; r < B * n / N; r++) { /* s of each run */
            double mu = 0, v = 0;
            for (size_t i = 0; i < N; i++) mu += x[r * N + i] / (double)N;
            for (size_t i = 0; i < N; i++) v += (x[r * N + i] - mu) * (x[r * N + i] - mu) / (double)N;
            smin = fmin(smin, sqrt(v + eps));
        }
        double amp = 1 + 2 * xs / smin;
        S = (affine ? fmax(1, max_abs(th, W)) : 1) * gs * amp * amp * amp + (affine ? max_abs(th + W, W) : 0);
        T = N + B * n / N;
    } else if (sscanf(spec, "logsoftmax:%zu", &N) == 1) {
        S = gs * (1 + xs); /* y = (x − max) − log Σ with Σ in [1, N]; g_x = g − p·Σg */
        T = N;
    } else {
        ck_assert(sscanf(spec, "batchnorm:%zu", &C) == 1);
        const double *rm = th + (affine ? 2 * C : 0), *rv = rm + C;
        double sdmin = INFINITY, eps = eps_of(spec, 1e-5);
        for (size_t c = 0; c < C; c++) sdmin = fmin(sdmin, sqrt(rv[c] + eps));
        S = (affine ? fmax(1, max_abs(th, C)) : 1) * gs * (1 + (xs + max_abs(rm, C)) / sdmin) +
            (affine ? max_abs(th + C, C) : 0);
        T = B * n / C;
    }
    return 2 * (double)(2 * T + 16) * 0x1p-53 * (double)T * S;
}

START_TEST(norms_match_torch)
{
    for (size_t c = 0; c < sizeof torch_cases / sizeof *torch_cases; c++) {
        const char *spec = torch_cases[c].spec;
        size_t n = torch_cases[c].width, B = torch_cases[c].B;
        vijp_layer L;
        vijp_format F;
        vijp_format_fixed(&F, VIJP_DOUBLE);
        ck_assert(!vijp_layer_parse(&L, spec, n, NULL));
        size_t P = L.type->param_count(&L);
        double y[16], gx[16], gt[16], *x = (double *)torch_cases[c].x, *g = (double *)torch_cases[c].g;
        vijp_mat th = {.rows = P, .cols = 1, .fmt = &F, .d = (double *)torch_cases[c].theta},
                 X = {.rows = n, .cols = B, .fmt = &F, .d = x}, G = {.rows = n, .cols = B, .fmt = &F, .d = g},
                 Y = {.rows = n, .cols = B, .fmt = &F, .d = y}, GX = {.rows = n, .cols = B, .fmt = &F, .d = gx},
                 GT = {.rows = P, .cols = 1, .fmt = &F, .d = gt};
        ck_assert(!vijp_layer_forward(&L, &th, &X, &Y, NULL));
        ck_assert(!vijp_layer_vjp(&L, &th, &X, &G, &GX, NULL));
        if (P) ck_assert(!vijp_layer_vjp_param(&L, &th, &X, &G, &GT, NULL));
        double tol = torch_tolerance(spec, n, B, torch_cases[c].theta, x, g);
        for (size_t k = 0; k < n * B; k++) {
            ck_assert_msg(fabs(y[k] - torch_cases[c].y[k]) <= tol, "%s: y[%zu] = %.17g, torch %.17g (tolerance %g)",
                          spec, k, y[k], torch_cases[c].y[k], tol);
            ck_assert_msg(fabs(gx[k] - torch_cases[c].gx[k]) <= tol, "%s: gx[%zu] = %.17g, torch %.17g (tolerance %g)",
                          spec, k, gx[k], torch_cases[c].gx[k], tol);
        }
        for (size_t k = 0; k < torch_cases[c].gtheta_count; k++)
            ck_assert_msg(fabs(gt[k] - torch_cases[c].gtheta[k]) <= tol, "%s: gtheta[%zu] = %.17g, torch %.17g "
                          "(tolerance %g)", spec, k, gt[k], torch_cases[c].gtheta[k], tol);
        vijp_layer_clear(&L);
    }
}
END_TEST

/* The cokernel's dimension per run (groupnorm: per group), 2 at ε = 0 (span{1, ŷ}) and 1 at ε > 0
 * (span{1}: J·ŷ = ŷ·ε/s³ ≠ 0), affine weights or not: the fragment's length
 * against the number of singular values of the double Jacobian below
 * max(m, n)·u·σ_max (LAPACK, vijp_numeric_analysis), on points whose
 * smallest nonzero singular value is far above that (ε = 0.5, weights in
 * ±[0.5, 1.5]). */
START_TEST(norm_cokernel_dimension)
{
    static const struct {
        const char *spec;
        size_t width, per_run;
    } cases[] = {
        {"layernorm:3", 9, 2}, {"layernorm:3:eps=0.5", 9, 1}, {"layernorm:4:affine", 8, 2},
        {"layernorm:4:eps=0.5:affine", 8, 1}, {"layernorm:eps=0.5", 5, 1},
        {"groupnorm:2x4:eps=0:affine", 8, 2}, {"groupnorm:3x3:eps=0.5:affine", 9, 1},
        {"logsoftmax:3", 9, 1}, {"logsoftmax", 6, 1}, /* span{p}: pᵀJ = pᵀ − (pᵀ1)pᵀ = 0 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        vijp_net net;
        ck_assert(!vijp_net_build(&net, cases[c].spec, 1, cases[c].width, NULL));
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 11 + c, NULL));
        const vijp_layer *L = &net.layers[0];
        size_t n = L->in, P = L->type->param_count(L), N = 0, G = 0, C = 0;
        if (sscanf(cases[c].spec, "groupnorm:%zux%zu", &G, &C) == 2) N = n / G;
        else if (sscanf(cases[c].spec, "layernorm:%zu", &N) != 1 && sscanf(cases[c].spec, "logsoftmax:%zu", &N) != 1) N = n;
        vijp_format F;
        vijp_format_fixed(&F, VIJP_DOUBLE);
        double x[9], J[81];
        for (size_t i = 0; i < n; i++) x[i] = sin(1.7 * (double)i + (double)c);
        vijp_mat th = {.rows = P, .cols = 1, .fmt = &F, .d = net.theta[0]}, X = {.rows = n, .cols = 1, .fmt = &F, .d = x},
                 Jm = {.rows = n, .cols = n, .fmt = &F, .d = J};
        ck_assert(!vijp_layer_jacobian(L, &th, &X, &Jm, NULL));
        vijp_numeric a;
        ck_assert(!vijp_numeric_analysis(J, n, n, &a, NULL));
        size_t want = cases[c].per_run * (n / N);
        ck_assert_msg(a.cokernel_dim == want, "%s: %zu singular values near 0, want %zu", cases[c].spec,
                      a.cokernel_dim, want);
        ck_assert_uint_eq(vijp_layer_fragment_count(L, &th, &X), want);
        vijp_numeric_clear(&a);
        vijp_net_free(&net);
    }
}
END_TEST

Suite *suite_normlayers(void)
{
    Suite *s = suite_create("normlayers");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bad_arguments_refused);
    tcase_add_test(tc, specs_print_back);
    tcase_add_test(tc, transpose_values);
    tcase_add_test(tc, norms_match_torch);
    tcase_add_test(tc, norm_cokernel_dimension);
    suite_add_tcase(s, tc);
    return s;
}
